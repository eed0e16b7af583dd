"""The copy statistics of scripts/train_tiny.py (--copy-stats) and the tokens --code-weight weighs: whether the copy
that retrieval needs has formed, on the needle and recall data of scripts/needle_data.py (docs/NEEDLE.md)."""
import sys

import torch


def copy_tokens(tok, V, dev):
    """For --copy-stats: the id of " is" and a [V] mask of the code tokens (digits, with or without the word mark
    before and a period after: "▁48.", and "▁4" then "3." where the tokenizer splits a code)."""
    ids = tok.encode(" is", add_special_tokens=False).ids
    if len(ids) != 1:
        sys.exit(f"train_tiny: --copy-stats and --code-weight need ' is' to be one token; this tokenizer gives {ids}")
    mask = torch.zeros(V, dtype=torch.bool)
    for s, i in tok.get_vocab(with_added_tokens=False).items():
        digits = s.replace("\u2581", "").rstrip(".")
        mask[i] = digits.isascii() and digits.isdigit()
    if not mask.any():
        sys.exit("train_tiny: --copy-stats and --code-weight: the tokenizer has no digit tokens")
    return ids[0], mask.to(dev)


def answer_code_at(enc, canvas, is_id, is_code):
    """[B, C] bool: the canvas positions holding a code right after " is" (the answer's code)."""
    prev = torch.cat([enc[:, -1:], canvas[:, :-1]], 1)
    return (prev == is_id) & is_code[canvas]


def copy_counts(enc, canvas, noisy, pred, ar_pred, is_id, is_code):
    """--copy-stats of one forward pass as 0-dim tensors (no host sync): right and all predictions of the encoder's
    next token where it is a code after "NAME is" and a line of the same NAME came earlier in the example (the two
    ids before "is" name it; a name keeps its code within a prompt, so only a copy predicts it), then right and all
    of the canvas's predictions of a noised code right after "is" (the answer's code). `pred`: the canvas argmax."""
    B, S = enc.shape
    V, dev = is_code.shape[0], enc.device
    at = answer_code_at(enc, canvas, is_id, is_code) & (noisy != canvas)
    code = ((at & (pred == canvas)).sum(), at.sum())
    if ar_pred is None or S < 4:
        zero = torch.zeros((), dtype=torch.long, device=dev)
        return (zero, zero) + code
    line = torch.zeros_like(enc, dtype=torch.bool)  # "is" at i, a code at i + 1
    line[:, 2:-1] = (enc[:, 2:-1] == is_id) & is_code[enc[:, 3:]]
    rows, cols = torch.arange(B, device=dev)[:, None], torch.arange(S, device=dev)[None]
    key = torch.where(line, (rows * V + enc.roll(2, 1)) * V + enc.roll(1, 1), -1 - rows * S - cols)
    keys, order = torch.sort(key.reshape(-1), stable=True)  # equal keys stay in the order of their positions
    again = torch.zeros(B * S, dtype=torch.bool, device=dev)
    again[order[1:]] = keys[1:] == keys[:-1]
    again = again.view(B, S)[:, :-1]  # the code after "is" at i is predicted at i
    return ((again & (ar_pred == enc[:, 1:])).sum(), again.sum()) + code


def copy_report(sums):
    """The --copy-stats part of a log line and of the history entry (accuracies over the lines since the last);
    zeroes the sums."""
    n_copy, n_code = sums["copy_n"].item(), sums["code_n"].item()
    acc = {"copy_acc": sums["copy"].item() / max(n_copy, 1), "code_acc": sums["code"].item() / max(n_code, 1)}
    for v in sums.values():
        v.zero_()
    return (f" copy-acc {acc['copy_acc']:.3f} of {n_copy} answer-code-acc {acc['code_acc']:.3f} of {n_code}",
            acc)
