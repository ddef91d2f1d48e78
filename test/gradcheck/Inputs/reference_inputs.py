"""The inputs megac-gradcheck draws (tools/megac-gradcheck/RandomInputs.cpp), reproduced so
an independent forward pass can be compared with its interpreter: SplitMix64 with seed 1;
every checkpoint tensor in the order the module first declares it, row-major over its full
shape, uniform in [-1, 1); then ids and labels, each `next() % vocab`."""

MASK = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed=1):
        self.state = seed

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def uniform(self):
        return -1.0 + 2.0 * ((self.next() >> 11) * 2.0**-53)

    def vector(self, n):
        return [self.uniform() for _ in range(n)]

    def matrix(self, rows, cols):
        return [self.vector(cols) for _ in range(rows)]

    def tokens(self, batch, seq, vocab):
        return [[self.next() % vocab for _ in range(seq)] for _ in range(batch)]


def cross_entropy_term(logits, label):
    import math
    m = max(logits)
    return m + math.log(sum(math.exp(t - m) for t in logits)) - logits[label]


def print_check(loss):
    """A FileCheck line for the first line megac-gradcheck prints."""
    print("CHECK: gradcheck: loss %.12f (seed 1)" % loss)
