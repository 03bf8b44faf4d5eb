"""A stand-in for the `spaces` package (0.51.3) under ZeroGPU, for tests on a CPU: what it does to a decorated call,
without the scheduler and the GPU.

As the real package does when SPACES_ZERO_GPU is set: each call runs in a process forked from the server; arguments
go to it, and the return value or each yielded item comes back, through multiprocessing's queues (pickled with its
ForkingPickler); nothing the worker changes reaches the server; a generator closed by the server sets the worker's
stop event, which the worker reads after its next item, then closes its generator and ends (the close waits for
that); an exception other than gradio.Error reaches the server as gradio.Error(class name). The duration is
computed from the call's arguments (a callable) and written, with the function's name, to FAKE_ZERO_GPU_LOG.
Without SPACES_ZERO_GPU, GPU() returns the function unchanged, as the real package does.
"""

import inspect
import json
import multiprocessing
import os
import queue
import threading
import traceback
from functools import wraps

__version__ = "0.51.3-fake"
_CTX = multiprocessing.get_context("fork")


def _enabled() -> bool:
    return os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "t", "true")


def _log(task, seconds) -> None:
    path = os.environ.get("FAKE_ZERO_GPU_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"task": task.__name__, "duration": seconds, "pid": os.getpid()}) + "\n")


def _duration(duration, args, kwargs) -> int:
    seconds = duration(*args, **kwargs) if callable(duration) else duration
    return 60 if seconds is None else int(seconds)


class _End:
    pass


class _Failed:
    def __init__(self, exc: BaseException):
        self.name, self.text = type(exc).__name__, traceback.format_exc()
        gradio_error = None
        try:
            import gradio as gr

            gradio_error = exc if isinstance(exc, gr.Error) else None
        except ImportError:
            pass
        self.gradio_error = gradio_error


def _raise(failed: _Failed):
    import gradio as gr

    if failed.gradio_error is not None:
        raise failed.gradio_error
    print(failed.text)
    raise gr.Error(failed.name, title="ZeroGPU worker error")


def _worker(task, args_queue, results, stop, generator: bool):
    (args, kwargs) = args_queue.get()
    try:
        if not generator:
            results.put(task(*args, **kwargs))
        else:
            gen = task(*args, **kwargs)
            while True:
                try:
                    item = next(gen)
                except StopIteration:
                    break
                if stop.is_set():  # read only once the next item is there, as the real worker does
                    gen.close()
                    break
                results.put(item)
    except Exception as exc:
        results.put(_Failed(exc))
    results.put(_End())


def _start(task, args, kwargs, generator: bool):
    args_queue, results, stop = _CTX.SimpleQueue(), _CTX.SimpleQueue(), _CTX.Event()
    process = _CTX.Process(target=_worker, args=(task, args_queue, results, stop, generator), daemon=True)
    process.start()
    try:
        args_queue.put((args, kwargs))  # pickled: an argument that cannot be, fails here, in the server
    except Exception:
        process.kill()
        raise
    return process, results, stop


def GPU(task=None, duration=None, **_):
    if task is None or not callable(task) or isinstance(task, int):
        if isinstance(task, int):
            duration = task
        return lambda fn: GPU(fn, duration=duration)
    if not _enabled():
        return task

    if inspect.isgeneratorfunction(task) or inspect.isgeneratorfunction(getattr(task, "__func__", None)):

        @wraps(task)
        def stream(*args, **kwargs):
            _log(task, _duration(duration, args, kwargs))
            process, results, stop = _start(task, args, kwargs, True)
            items: queue.Queue = queue.Queue()

            def drain():  # the server's side of the queue, as the real package's fill_yield_queue
                while True:
                    item = results.get()
                    items.put(item)
                    if isinstance(item, (_End, _Failed)):
                        return

            drainer = threading.Thread(target=drain, daemon=True)
            drainer.start()
            try:
                while True:
                    item = items.get(timeout=600)
                    if isinstance(item, _Failed):
                        _raise(item)
                    if isinstance(item, _End):
                        return
                    try:
                        yield item
                    except GeneratorExit:
                        stop.set()
                        raise
            finally:
                drainer.join(timeout=600)  # a close waits for the worker's next item, as the real one does
                process.join(timeout=60)

        return stream

    @wraps(task)
    def call(*args, **kwargs):
        _log(task, _duration(duration, args, kwargs))
        process, results, _ = _start(task, args, kwargs, False)
        result = results.get()
        process.join(timeout=60)
        if isinstance(result, _Failed):
            _raise(result)
        return result

    return call


def gradio_auto_wrap(task):
    """Gradio hands every event handler to this on a Space; the real package wraps it only when
    SPACES_GRADIO_AUTO_WRAP is set, which specviz does not do (its device calls are wrapped explicitly)."""
    if os.environ.get("SPACES_GRADIO_AUTO_WRAP", "").lower() in ("1", "t", "true") and callable(task):
        return GPU(task)
    return task
