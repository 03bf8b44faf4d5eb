"""What a race sends back from a ZeroGPU worker: the pickled size and cost of each packet of a real race, against the
tokenizer that every view used to carry.

    python scripts/zero_gpu_packets.py [--tokens 64]
"""

import argparse
import pickle
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specviz.app.device_calls import DeviceCalls  # noqa: E402
from specviz.app.request import read_request  # noqa: E402
from specviz.app.shelf import OFFLINE_QWEN, ModelShelf  # noqa: E402
from specviz.drafters.registry import default_kind  # noqa: E402
from specviz.record import TokenTexts  # noqa: E402
from specviz.runtime import quiet_transformers  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=64)
    args = p.parse_args()
    quiet_transformers()
    shelf = ModelShelf([OFFLINE_QWEN], "cpu")
    shelf.get(OFFLINE_QWEN.label, "bfloat16")
    ask = dict(
        pair=OFFLINE_QWEN.label,
        drafter=default_kind().name,  # the app's first race
        dtype="bfloat16",
        prompt="Write a Python function that returns the n-th Fibonacci number.",
        max_new_tokens=args.tokens,
    )
    sizes, seconds = [], 0.0
    for packet in DeviceCalls(shelf).race(read_request(ask, shelf)):
        began = time.perf_counter()
        data = pickle.dumps(packet)
        pickle.loads(data)
        seconds += time.perf_counter() - began
        sizes.append(len(data))
    began = time.perf_counter()
    tokenizer = pickle.dumps(TokenTexts(shelf.current().target.tokenizer))
    print(
        f"{len(sizes)} packets for a {args.tokens}-token race: median {sorted(sizes)[len(sizes) // 2]} B, largest "
        f"{max(sizes)} B, all {sum(sizes) / 1e3:.1f} kB; pickled and unpickled in {1000 * seconds / len(sizes):.2f} ms "
        f"each. The tokenizer a view carried before: {len(tokenizer) / 1e6:.2f} MB, "
        f"{1000 * (time.perf_counter() - began):.0f} ms to pickle"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
