// A simulated compute cluster (seed 004's ClickHouse cluster, in miniature): tasks arrive over HTTP,
// each wanting some cores for some core-seconds of work, and share the cluster's cores. It exports
// its CPU utilisation at /metrics for Prometheus, and it degrades when overloaded: beyond its
// capacity, context switches and memory pressure waste part of every core, so every running task
// slows down more than the sharing alone would explain.
//
//   POST /tasks      {"cores": 2, "work": 3}   runs a task; answers when it is done
//   POST /capacity   {"cores": 16}              the cluster loses (or gains) capacity
//   GET  /metrics    Prometheus text: cluster_cpu_utilisation (mean over the last second), ...
//   GET  /stats      JSON: the same figures, for tests
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface ClusterOptions {
  /** Cores of the cluster (capacity). */
  readonly cores: number;
  /** Label `cluster` on every metric, so several clusters can share one Prometheus. */
  readonly name: string;
  /** Simulation step, ms. */
  readonly tickMs?: number;
  /**
   * Share of throughput lost per unit of overload: with demand D > capacity C every core does
   * 1 / (1 + thrash × (D/C − 1)) of its work. 0.5: at twice the capacity, a third of it is wasted.
   */
  readonly thrash?: number;
}

interface Task {
  readonly cores: number;
  remaining: number;
  readonly done: () => void;
}

export interface ClusterStats {
  readonly name: string;
  readonly capacityCores: number;
  readonly running: number;
  /** Cores the running tasks ask for, over capacity: > 1 is an overload (CPU itself reads 1.0). */
  readonly demand: number;
  /** Busy cores over capacity, mean over the last second: what node exporter would report. */
  readonly utilisation: number;
  readonly completed: number;
  readonly maxRunning: number;
}

export class SimulatedCluster {
  private capacity: number;
  private readonly tasks = new Set<Task>();
  private readonly window: number[] = [];
  private completed = 0;
  private maxRunning = 0;
  private timer: NodeJS.Timeout | null = null;
  private server: Server | null = null;
  private readonly tickMs: number;
  private readonly thrash: number;

  constructor(private readonly options: ClusterOptions) {
    this.capacity = options.cores;
    this.tickMs = options.tickMs ?? 50;
    this.thrash = options.thrash ?? 0.5;
  }

  /** Runs one task to completion. */
  run(cores: number, work: number): Promise<void> {
    return new Promise((done) => {
      this.tasks.add({ cores, remaining: work, done });
      this.maxRunning = Math.max(this.maxRunning, this.tasks.size);
    });
  }

  setCapacity(cores: number): void {
    this.capacity = cores;
  }

  stats(): ClusterStats {
    const utilisation = this.window.length === 0 ? 0 : this.window.reduce((a, b) => a + b, 0) / this.window.length;
    return {
      name: this.options.name,
      capacityCores: this.capacity,
      running: this.tasks.size,
      demand: this.demandCores() / this.capacity,
      utilisation,
      completed: this.completed,
      maxRunning: this.maxRunning,
    };
  }

  /** Starts simulating and serving on 127.0.0.1:`port` (0 = any free port). Resolves the URL. */
  async start(port = 0): Promise<string> {
    let last = performance.now();
    this.timer = setInterval(() => {
      const now = performance.now();
      this.step((now - last) / 1000);
      last = now;
    }, this.tickMs);
    const server = createServer((request, response) => void this.serve(request, response));
    this.server = server;
    await new Promise<void>((done) => server.listen(port, "127.0.0.1", done));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    for (const task of this.tasks) task.done();
    this.tasks.clear();
    const server = this.server;
    this.server = null;
    if (server) {
      server.closeAllConnections();
      await new Promise<void>((done) => server.close(() => done()));
    }
  }

  private demandCores(): number {
    let demand = 0;
    for (const task of this.tasks) demand += task.cores;
    return demand;
  }

  /** Processor sharing over `seconds`, with the overload penalty. */
  private step(seconds: number): void {
    const demand = this.demandCores();
    const overload = demand / this.capacity;
    const share = overload <= 1 ? 1 : 1 / overload / (1 + this.thrash * (overload - 1));
    for (const task of this.tasks) {
      task.remaining -= task.cores * share * seconds;
      if (task.remaining > 0) continue;
      this.tasks.delete(task);
      this.completed += 1;
      task.done();
    }
    this.window.push(Math.min(1, overload));
    const perSecond = Math.max(1, Math.round(1000 / this.tickMs));
    while (this.window.length > perSecond) this.window.shift();
  }

  private async serve(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = new URL(request.url ?? "/", "http://localhost").pathname;
    try {
      if (request.method === "POST" && path === "/tasks") {
        const { cores, work } = (await readJson(request)) as { cores?: unknown; work?: unknown };
        if (typeof cores !== "number" || typeof work !== "number" || !(cores > 0) || !(work > 0)) {
          return reply(response, 400, { error: `a task needs "cores" > 0 and "work" > 0 (core-seconds), got ${JSON.stringify({ cores, work })}` });
        }
        const startedAt = performance.now();
        await this.run(cores, work);
        return reply(response, 200, { tookMs: Math.round(performance.now() - startedAt) });
      }
      if (request.method === "POST" && path === "/capacity") {
        const { cores } = (await readJson(request)) as { cores?: unknown };
        if (typeof cores !== "number" || !(cores > 0)) return reply(response, 400, { error: `"cores" must be > 0, got ${JSON.stringify(cores)}` });
        this.setCapacity(cores);
        return reply(response, 200, this.stats());
      }
      if (path === "/stats") return reply(response, 200, this.stats());
      if (path === "/metrics") {
        response.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" });
        response.end(this.metricsText());
        return;
      }
      reply(response, 404, { error: `no ${request.method} ${path}; try POST /tasks, POST /capacity, GET /metrics, GET /stats` });
    } catch (error) {
      reply(response, 400, { error: error instanceof Error ? error.message : String(error) });
    }
  }

  private metricsText(): string {
    const s = this.stats();
    const label = `{cluster=${JSON.stringify(s.name)}}`;
    return [
      "# HELP cluster_cpu_utilisation Busy cores over capacity, mean over the last second (what node exporter's idle time gives).",
      "# TYPE cluster_cpu_utilisation gauge",
      `cluster_cpu_utilisation${label} ${s.utilisation}`,
      "# HELP cluster_demand_ratio Cores the running tasks ask for, over capacity; above 1 the cluster is overloaded.",
      "# TYPE cluster_demand_ratio gauge",
      `cluster_demand_ratio${label} ${s.demand}`,
      "# HELP cluster_capacity_cores Cores of the cluster.",
      "# TYPE cluster_capacity_cores gauge",
      `cluster_capacity_cores${label} ${s.capacityCores}`,
      "# HELP cluster_tasks_running Tasks running now.",
      "# TYPE cluster_tasks_running gauge",
      `cluster_tasks_running${label} ${s.running}`,
      "# HELP cluster_tasks_completed_total Tasks finished.",
      "# TYPE cluster_tasks_completed_total counter",
      `cluster_tasks_completed_total${label} ${s.completed}`,
      "",
    ].join("\n");
  }
}

function reply(response: ServerResponse, status: number, body: unknown): void {
  if (response.headersSent) return;
  response.writeHead(status, { "content-type": "application/json" });
  response.end(JSON.stringify(body));
}

async function readJson(request: IncomingMessage): Promise<unknown> {
  let text = "";
  for await (const chunk of request) text += String(chunk);
  return text === "" ? {} : JSON.parse(text);
}
