"""Concurrency: several requests decoded together, plain and with each drafter, swept over rising concurrency levels.
level_runner.py runs one level on loaded models and sweep_runner.py every level and lane in turn (torch);
sweep_results.py is what they send and sweep_view.py what a sweep shows, pure Python: throughput and latency against
concurrency, the crossover where a drafter stops paying, the theory beside it and the γ adaptive chose;
sweep_record.py keeps a sweep as a file that replays."""
