"""Many requests at once, in two modes of one experiment: concurrency levels (each level's requests arrive together,
a row for each: throughput and latency against concurrency, the crossover where a drafter stops paying, the theory
beside it) and traffic (requests arriving at rates, served by continuous batching and judged against a latency
objective, with a simulator of the same scheduler held to the measurements).

traffic_plan.py checks what a run asks for; runner.py serves it on loaded models (torch); results.py is what it sends;
levels_view.py and rates_view.py are what each mode shows; traffic_record.py keeps a run as a file that replays;
vllm_advice.py writes what it measured as vLLM's draft length per batch size; latency.py and simulator.py are
traffic's figures and its model. All but runner.py are pure Python."""
