"""The digits data set and the small deterministic generator the C examples
use (examples/c/digits.c), so that the Python app trains on the same split,
in the same order, from the same initial weights."""
import gzip

FEATURES, CLASSES, MAX_PIXEL = 64, 10, 16
_MASK = (1 << 64) - 1


class DigitsRng:
    """xorshift64*: the C examples' digits_rng_next."""

    def __init__(self, state):
        self.state = state & _MASK

    def next(self):
        s = self.state
        s ^= s >> 12
        s ^= (s << 25) & _MASK
        s ^= s >> 27
        self.state = s
        return (s * 0x2545F4914F6CDD1D) & _MASK

    def uniform(self):
        return (self.next() >> 11) / 9007199254740992.0

    def shuffle(self, order):
        for i in range(len(order) - 1, 0, -1):
            j = self.next() % (i + 1)
            order[i], order[j] = order[j], order[i]


def load(path):
    """(pixels scaled to [0, 1] as float32 rows, labels) of the CSV (gzip or plain)."""
    import numpy as np
    opener = gzip.open if path.endswith(".gz") else open
    rows = []
    with opener(path, "rt") as f:
        for line in f:
            if line.strip():
                rows.append([int(v) for v in line.split(",")])
    data = np.array(rows, dtype=np.int64)
    if data.ndim != 2 or data.shape[1] != FEATURES + 1:
        raise ValueError(f"{path}: expected rows of {FEATURES} pixels and a label")
    return data[:, :FEATURES].astype(np.float32) / np.float32(MAX_PIXEL), data[:, FEATURES].copy()


def split(n):
    """(train rows, test rows): the C examples' fixed split (a fifth held out)."""
    order = list(range(n))
    DigitsRng(0x9E3779B97F4A7C15).shuffle(order)
    n_test = n // 5
    return order[n_test:], order[:n_test]
