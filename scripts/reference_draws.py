"""The reference's random draws and temperatures as scripts/make_fixtures.py replays them: the engine's canvas
RNG (an LCG), the inverse-CDF categorical draw, and the temperature schedule in the reference's arithmetic, so the
recorded generate() runs use the same stream of uniforms as the engine (SPEC.md 4.3)."""
import numpy as np
import torch

M64 = (1 << 64) - 1


class Lcg:
    """The engine's canvas RNG: state = state*6966169279 + 1039523323 mod 2^64, output = high 32 bits."""

    def __init__(self, seed):
        self.state = (seed + 1) & M64

    def next_u32(self):
        self.state = (self.state * 6966169279 + 1039523323) & M64
        return self.state >> 32

    def uniform(self):  # [0, 1) as a double
        return self.next_u32() / 4294967296.0

    def randint(self, n):  # [0, n)
        return (self.next_u32() * n) >> 32


def categorical(probs_row, u):
    """Inverse-CDF draw: first index whose running sum (f64 over the f32 probabilities) exceeds u.
    Returns (index, distance from u to the nearest boundary of the chosen interval)."""
    p = probs_row.detach().cpu().double().numpy()
    cdf = np.cumsum(p)
    idx = int(np.searchsorted(cdf, u, side="right"))
    if idx >= len(p):
        idx = int(np.nonzero(p > 0)[0][-1])
    lo = cdf[idx - 1] if idx > 0 else 0.0
    return idx, float(min(u - lo, cdf[idx] - u))


def temperature(cur, n, t_min=0.4, t_max=0.8):
    """T as the reference computes it when cur_step is an int32 tensor: fp32 tensor arithmetic (SPEC.md 4.3.3)."""
    t = torch.tensor(cur, dtype=torch.int32)
    return (t_min + ((t_max - t_min) * (t / n))).float()


def temperature_double(cur, n, t_min=0.4, t_max=0.8):
    """T if cur_step were a Python int: double arithmetic, rounded to f32 when it divides the logits."""
    return torch.tensor(t_min + ((t_max - t_min) * (cur / n)), dtype=torch.float32)
