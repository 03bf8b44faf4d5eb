"""What computes a pair's forwards: each runtime is a module (or a small package) here declaring RUNTIME
(runtime.Runtime), found by runtime_registry.py as the drafters' registry finds a kind. pair.py is the one place a pair
is opened on one; choice.py prices the runtimes against each other from measured costs."""
