"""Under load: several requests decoded together, plain and with each drafter, at rising concurrency. levels.py runs
one level on loaded models (torch); load_view.py is what a sweep shows, pure Python: throughput and latency against
concurrency, the crossover where a drafter stops paying, the theory beside it and the γ adaptive chose."""
