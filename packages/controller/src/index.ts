export {
  Controller,
  type ControllerOptions,
  type ControllerSnapshot,
  type ControllerThrottlerSnapshot,
  type ControllerClassSnapshot,
} from "./controller.ts";
export { startController, type StartControllerOptions, type RunningController } from "./controller-server.ts";
export { bucketConfigOf, describeLimit } from "./bucket-config.ts";
export { GRANTED_RATE_SAMPLE_MS, GRANTED_RATE_WINDOW_MS } from "./granted-rates.ts";
export { jsonSyntaxPosition } from "./json-syntax-position.ts";
