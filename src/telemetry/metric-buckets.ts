// Histogram buckets (seconds) of the run server's and the workers' Prometheus metrics: a quantity
// both measure (step time, model latency, sandbox start, queue wait) is bucketed the same way.
export const STEP_BUCKETS = [0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600];
export const LATENCY_BUCKETS = [0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120];
export const START_BUCKETS = [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120];
export const WAIT_BUCKETS = [0.1, 0.5, 1, 5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600];
