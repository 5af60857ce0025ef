export { PrometheusText, PROMETHEUS_CONTENT_TYPE, formatValue, type Labels, type Sample, type HistogramSample } from "./prometheus-text.ts";
export { histogramWithMax } from "./histogram-with-max.ts";
export { startStatusServer, type StatusServerOptions, type StatusDashboard, type RunningStatusServer } from "./status-server.ts";
export { TOKEN_COOKIE, TOKEN_QUERY } from "./http-access.ts";
