// The open WatchDynamicSpec streams of a Controller: each is sent the spec in force when it starts
// and every applied change after; a stream whose transport fails ends alone, and close() ends all.
import { SluiceError } from "@sluice/core";
import type { DynamicSpecUpdate } from "@sluice/protocol";

interface Watcher {
  readonly clientId: string;
  emit(update: DynamicSpecUpdate): void;
  end(error: SluiceError): void;
}

export class DynamicSpecWatchers {
  private readonly watchers = new Set<Watcher>();

  constructor(private readonly log: (line: string) => void) {}

  /**
   * Sends `first` at once, then every update passed to notifyAll; resolves when `signal` aborts,
   * rejects with the error the stream was ended with.
   */
  watch(clientId: string, emit: (update: DynamicSpecUpdate) => void, signal: AbortSignal, first: DynamicSpecUpdate): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        this.watchers.delete(watcher);
        resolve();
      };
      const watcher: Watcher = {
        clientId,
        emit,
        end: (error) => {
          signal.removeEventListener("abort", onAbort);
          this.watchers.delete(watcher);
          reject(error);
        },
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.watchers.add(watcher);
      this.notify(watcher, first);
    });
  }

  notifyAll(update: DynamicSpecUpdate): void {
    for (const watcher of [...this.watchers]) this.notify(watcher, update);
  }

  endAll(error: SluiceError): void {
    for (const watcher of [...this.watchers]) watcher.end(error);
    this.watchers.clear();
  }

  /** A transport whose emit throws has lost its stream: that watcher ends, the others go on. */
  private notify(watcher: Watcher, update: DynamicSpecUpdate): void {
    try {
      watcher.emit(update);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      this.log(`dynamic_spec watcher ${JSON.stringify(watcher.clientId)} dropped: ${reason}`);
      watcher.end(new SluiceError("CONTROLLER_UNAVAILABLE", `the dynamic_spec stream failed (${reason}); reconnect to keep watching`));
    }
  }
}
