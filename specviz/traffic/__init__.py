"""Traffic: requests that arrive at a rate, served by continuous batching, measured against a latency objective;
and a simulator of the same scheduler that the measurements hold to."""
