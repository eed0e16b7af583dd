#!/usr/bin/env python3
"""Writes the tokenizer exactness cases: ids and decoded text from the Hugging Face `tokenizers` library.

    python3 scripts/make_tokenizer_cases.py \
        --tokenizer .cache/test-data/gemma3/tokenizer.json \
        --out tests/fixtures/tokenizer/gemma3_cases.jsonl \
        [--extra-tokenizer models/dg-tiny/tokenizer.json --extra-out tests/fixtures/tokenizer/dg_tiny_cases.jsonl]

Needs Python 3.10+ and `tokenizers` (0.2x); no network. The test strings are built deterministically
(random.Random(seed)), so re-running with the same tokenizer writes the same file. Each output line is one of
    {"text": T, "ids": [...], "decoded": D}                     encode(T, add_special_tokens=False) and decode
        plus "ids_plain" (encode_special_tokens=True) when T holds a special-token literal,
        plus "decoded_skip" (skip_special_tokens=True) when ids hold a special token;
    {"decode_ids": [...], "decoded": D, "decoded_skip": D2}     decode of a constructed id sequence.
--texts-only writes the inputs without expected values (no `tokenizers` needed; for local cross-checks).
"""

import argparse
import json
import random
import sys

SEED = 20240611

WORDS = (
    "the of and to in is was for on that with as by at from his her it an were are which this be or "
    "have had not but one all their they has been more when who would there can its only other also after "
    "first new some time two these may such into than then them most over about world people year years "
    "city state between during many while later being under government system water music school history "
    "language model token decoder encoder diffusion sampling denoise canvas prompt answer question server "
    "Hello hello World Tokenizer BPE Gemma don't can't I'm you're it's naïve café résumé coöperate façade "
    "über straße Ångström jalapeño piñata déjà vu"
).split()

CJK = "我们的模型是一个基于扩散的语言模型，可以并行生成文本。今天天气很好，我们去公园散步吧！中文分词测试：北京大学生前来应聘。"
JAPANESE = "私は日本語を勉強しています。カタカナとひらがな、そして漢字。東京スカイツリーは高いです！ｶﾀｶﾅ半角"
KOREAN = "안녕하세요. 저는 한국어를 공부하고 있습니다. 대한민국의 수도는 서울입니다! 한글 자모: ㄱㄴㄷㅏㅑ"
ARABIC = "مرحبا بالعالم. هذا نص عربي للاختبار، مع أرقام ١٢٣٤٥ وتشكيل: كَتَبَ الطَّالِبُ الدَّرْسَ."
HEBREW = "שלום עולם. זהו טקסט בעברית לבדיקה, עם ניקוד: בְּרֵאשִׁית בָּרָא."
OTHER_SCRIPTS = [
    "Привет, мир! Это проверка токенизатора на кириллице.",
    "Καλημέρα κόσμε· αυτό είναι ελληνικό κείμενο.",
    "नमस्ते दुनिया। यह हिंदी में परीक्षण है।",
    "สวัสดีชาวโลกนี่คือข้อความภาษาไทยที่ไม่มีช่องว่าง",
    "வணக்கம் உலகம், இது தமிழ் உரை.",
    "Xin chào thế giới, đây là tiếng Việt có dấu.",
    "ሰላም ዓለም። ይህ የአማርኛ ጽሑፍ ነው።",
    "Բարեւ աշխարհ, სალამი მსოფლიო",
]
EMOJI = [
    "😀", "🤖", "🚀", "❤️", "✨", "🔥", "👍", "👍🏽", "👋🏿", "🧑🏻‍💻", "👨‍👩‍👧‍👦", "👩‍❤️‍💋‍👨", "🏳️‍🌈", "🏴‍☠️",
    "🇺🇸", "🇯🇵", "🇩🇪", "1️⃣", "#️⃣", "©️", "🫠", "🪼", "🦾", "🧬", "☕", "♟️", "🀄", "🃏",
]
COMBINING = ["e\u0301", "a\u0300\u0301\u0302", "n\u0303", "o\u0308\u0304",
             "Z\u0335\u0322\u0353a\u0337\u0316l\u0334g\u0336o", "\u0915\u094d\u0937", "\u1100\u1161\u11a8", "i\u0307\u0301", "\u0041\u030a", "\u05d1\u05bc\u05b0"]
RARE = ["\ue000", "\uf8ff", "\U000f0000", "\U0010fffd", "\U0010ffff", "\U00010000", "\U0001d11e", "\U0001f9ff",
        "\U00020000", "\U0002a6d6", "\U000e0041", "\U000e007f", "\ufdd0", "\ufffe", "\uffff", "\U0001fbf9",
        "\U00013000", "\U00010900", "\u2fff", "\u0378", "\U0001e900", "\U0001f0a1"]
SPACES = ["\u00a0", "\u3000", "\u2009", "\u200b", "\u200c", "\u200d", "\ufeff", "\u2028", "\u202f", "\u1680"]
CONTROL = ["\x00", "\x01", "\x07", "\x08", "\x0b", "\x0c", "\x1b[31mred\x1b[0m", "\x7f", "\r", "\r\n", "\x85"]
BYTE_LOOKALIKES = ["<0xFF>", "<0x41>", "<0x0A>", "<0xE4><0xB8><0xAD>", "<0xe4>", "<0x>", "<0xZZ>", "<0x+A>",
                   "\\xff", "\\x41\\x42", "0xFF", "<0x00>", "< 0x41 >", "<<0x41>>"]
SPECIAL_CONTEXT = [
    "<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "[multimodal]", "<start_of_turn>", "<end_of_turn>",
    "<start_of_image>", "<end_of_image>", "<image_soft_token>", "<unused0>", "<unused99>", "<unused6241>",
    "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
    "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n<eos>",
    "<start_of_tur", "<start_of_turn", "start_of_turn>", "<<bos>>", "<bos", "bos>", "< bos >", "<BOS>", "<bos><bos>",
    "text<eos>more", "<eos>\n\n<eos>", "<|turn>user\nhi<turn|>", "<|channel>thought<channel|>", "<|think|>",
    "<|tool_call>call:f{}<tool_call|>", "<|\"|>quoted<|\"|>", "<end_of_turn><end_of_turn>", "<unused>",
    "▁▁", "▁▁▁▁ leading markers", "a▁b", "▁",
]
HTML = ["</th>", "<th>", "<td>", "</td>", "<table><tr><th>Name</th><th>Age</th></tr></table>", "<br/>", "</s>",
        "<s>", "<div class=\"x\">text</div>", "<h1>Title</h1>", "<b>bold</b> <i>it</i>", "<a href='u'>link</a>",
        "<code>x = 1</code>", "<ul><li>one</li><li>two</li></ul>", "<sup>2</sup>", "<bbox>1,2,3,4</bbox>",
        "<html><body><p>para</p></body></html>", "<img src=\"a.png\"/>", "</blockquote>", "<tbody>"]
CODE = [
    "def {f}(x, y=None):\n    \"\"\"Docstring.\"\"\"\n    if y is None:\n        return x * 2\n    return x + y\n",
    "for i in range({n}):\n\tprint(f\"{{i}}: {{i ** 2}}\")\n",
    "#include <stdio.h>\n\nint main(void) {{\n  printf(\"%d\\n\", {n});\n  return 0;\n}}\n",
    "template <typename T>\nT {f}(const T& a, const T& b) {{ return a < b ? b : a; }}\n",
    "{{\"name\": \"{f}\", \"value\": {n}, \"tags\": [\"a\", \"b\"], \"nested\": {{\"ok\": true, \"x\": null}}}}",
    "$ ls -la /usr/share | grep {f} && echo \"done\" > /tmp/out.txt 2>&1\n",
    "SELECT {f}, COUNT(*) FROM t WHERE id > {n} GROUP BY {f};",
    "const {f} = async (a) => {{ await fetch(`/api/${{a}}`); }};",
    "    indented line\n        more indented\n\t\ttabbed\n",
    "fn {f}(v: &[u8]) -> Option<usize> {{ v.iter().position(|&b| b == 0x{n:02x}) }}",
]


def rand_word(rng):
    return rng.choice(WORDS)


def sentence(rng):
    words = [rand_word(rng) for _ in range(rng.randint(1, 14))]
    if rng.random() < 0.5:
        words[0] = words[0].capitalize()
    s = " ".join(words)
    if rng.random() < 0.3:
        s += rng.choice([",", ";", ":"]) + " " + " ".join(rand_word(rng) for _ in range(rng.randint(1, 5)))
    return s + rng.choice([".", "!", "?", "", "...", "?!"])


def number(rng):
    return rng.choice([str(rng.randint(0, 10**rng.randint(1, 12))), f"{rng.uniform(-1e4, 1e4):.{rng.randint(0, 6)}f}",
                       f"{rng.randint(1, 9)},{rng.randint(100, 999)},{rng.randint(100, 999)}",
                       f"{rng.randint(1900, 2100)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                       f"0x{rng.getrandbits(32):08X}", f"{rng.randint(1, 99)}%", f"${rng.randint(1, 999)}.99"])


def whitespace(rng):
    kind = rng.randrange(6)
    if kind == 0:
        return " " * rng.randint(1, 40)
    if kind == 1:
        return "\n" * rng.randint(1, 40)
    if kind == 2:
        return "\t" * rng.randint(1, 35)
    if kind == 3:
        return "".join(rng.choice([" ", "\n", "\t", "\r\n", "  "]) for _ in range(rng.randint(1, 12)))
    if kind == 4:
        return rng.choice(SPACES) * rng.randint(1, 3)
    return rng.choice(["\n \n", " \n", "\n ", "\t \t", " \t\n", "\r", "\r\n\r\n"])


def script_text(rng):
    src = rng.choice([CJK, JAPANESE, KOREAN, ARABIC, HEBREW] + OTHER_SCRIPTS)
    a = rng.randrange(len(src))
    return src[a:a + rng.randint(1, 40)]


def random_codepoint(rng):
    ranges = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F),
              (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0x1F300, 0x1FAFF), (0x10000, 0x1FFFF),
              (0x20000, 0x2FFFF), (0xE000, 0xF8FF), (0xF0000, 0x10FFFF), (0x2000, 0x2BFF)]
    lo, hi = rng.choice(ranges)
    while True:
        cp = rng.randint(lo, hi)
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)


def fragment(rng):
    kind = rng.randrange(14)
    if kind <= 2:
        return sentence(rng)
    if kind == 3:
        return whitespace(rng)
    if kind == 4:
        return script_text(rng)
    if kind == 5:
        return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 4)))
    if kind == 6:
        return rng.choice(COMBINING)
    if kind == 7:
        return "".join(random_codepoint(rng) for _ in range(rng.randint(1, 6)))
    if kind == 8:
        return rng.choice(BYTE_LOOKALIKES)
    if kind == 9:
        return rng.choice(SPECIAL_CONTEXT)
    if kind == 10:
        return rng.choice(HTML)
    if kind == 11:
        return rng.choice(CODE).format(f=rng.choice(["foo", "bar_baz", "Compute", "x1"]), n=rng.randint(0, 255))
    if kind == 12:
        return number(rng)
    return rng.choice(CONTROL + ["\ufffd", "\ufffd\ufffd", "�x"])


def build_texts(rng):
    texts = ["", " ", "  ", "\n", "\n\n", "\t", "a", "Hello world", "Hello  world", " Hello", "Hello ", "\ufffd",
             "▁", "▁▁▁", "'", "''", "\"", "...", "—", "–", "…"]
    texts += SPECIAL_CONTEXT + HTML + BYTE_LOOKALIKES + EMOJI + COMBINING + RARE + SPACES + CONTROL
    texts += [CJK, JAPANESE, KOREAN, ARABIC, HEBREW] + OTHER_SCRIPTS
    texts += [c.format(f="name", n=42) for c in CODE]
    texts += ["\n" * n for n in (2, 30, 31, 32, 33, 63, 64, 100)] + ["\t" * n for n in (30, 31, 32, 70)]
    texts += [" " * n for n in (2, 3, 15, 16, 17, 31, 32, 33, 64, 65, 200)]
    texts += ["x" + " " * n + "y" for n in range(1, 40)]
    for _ in range(400):
        texts.append(sentence(rng))
    for _ in range(150):
        texts.append(whitespace(rng) + sentence(rng) + whitespace(rng))
    for _ in range(200):
        texts.append(script_text(rng))
    for _ in range(150):
        texts.append("".join(random_codepoint(rng) for _ in range(rng.randint(1, 12))))
    for _ in range(100):
        texts.append("".join(rng.choice(EMOJI + [" ", "a"]) for _ in range(rng.randint(1, 10))))
    for _ in range(1000):
        texts.append("".join(fragment(rng) for _ in range(rng.randint(1, 6))))
    for _ in range(300):
        sep = rng.choice(["", " ", "\n", "  "])
        texts.append(sep.join(rng.choice(SPECIAL_CONTEXT + HTML) + fragment(rng) for _ in range(rng.randint(1, 4))))
    for _ in range(150):
        texts.append("".join(chr(rng.randint(0x20, 0x7E)) for _ in range(rng.randint(1, 60))))
    for n in (1500, 2500, 4000):  # long strings, one word for the model (no pre-tokenizer splits)
        texts.append("".join(fragment(rng) for _ in range(200))[:n])
    texts.append("".join(sentence(rng) + " " for _ in range(400))[:3000])
    texts.append("".join(random_codepoint(rng) for _ in range(1200)))
    texts.append("a" * 3000)
    texts.append("ab" * 1500)
    texts.append(" " * 1000 + "x" + "\n" * 1000)
    return texts


def byte_ids(tok_id, text):
    return [tok_id(f"<0x{b:02X}>") for b in text.encode("utf-8")]


def build_decode_ids(rng, tok_id, vocab_size):
    specials = [i for i in (tok_id(t) for t in ("<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "<start_of_turn>",
                                                "<end_of_turn>", "<start_of_image>", "<image_soft_token>"))
                if i is not None]
    words = [i for i in (tok_id(t) for t in ("▁", "▁▁", "▁the", "Hello", "▁world", "\n", "\n\n", "<0x0A>", "▁▁▁▁"))
             if i is not None]
    seqs = []
    for _ in range(100):
        seqs.append([rng.randrange(vocab_size) for _ in range(rng.randint(1, 30))])
    for _ in range(80):  # byte-fallback runs of valid text, optionally between other tokens
        text = "".join(random_codepoint(rng) for _ in range(rng.randint(1, 5)))
        seq = byte_ids(tok_id, text)
        if rng.random() < 0.5:
            seq = [rng.choice(words)] + seq + [rng.choice(words)]
        seqs.append(seq)
    for _ in range(80):  # broken runs: truncated, reordered, lone continuation bytes, interrupted
        seq = byte_ids(tok_id, "".join(random_codepoint(rng) for _ in range(rng.randint(1, 4))))
        kind = rng.randrange(5)
        if kind == 0 and len(seq) > 1:
            seq = seq[:-1]
        elif kind == 1:
            seq = seq[::-1]
        elif kind == 2:
            seq = [tok_id(f"<0x{rng.randint(0x80, 0xBF):02X}>")] + seq
        elif kind == 3:
            seq.insert(rng.randrange(len(seq) + 1), rng.choice(specials + words))
        else:
            seq = byte_ids(tok_id, "a") + [tok_id("<0xE4>")] + byte_ids(tok_id, "b")
        seqs.append(seq)
    for _ in range(60):  # specials mixed with words and bytes
        pool = specials + words + byte_ids(tok_id, "中é😀")
        seqs.append([rng.choice(pool) for _ in range(rng.randint(1, 15))])
    seqs.append(byte_ids(tok_id, "中") + byte_ids(tok_id, "文"))
    seqs.append([tok_id("<0xE4>"), tok_id("<0xB8>")])
    seqs.append([])
    seqs.append([vocab_size, vocab_size + 7, words[0]])  # ids past the vocab are dropped
    return [s for s in seqs if None not in s]


def load_ids(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    ids = dict(data["model"]["vocab"])
    for t in data.get("added_tokens") or []:
        ids[t["content"]] = t["id"]
    specials = [t["content"] for t in data.get("added_tokens") or [] if t.get("special")]
    return ids, specials


def write_cases(tokenizer_path, out_path, texts_only):
    rng = random.Random(SEED)
    ids_of, special_contents = load_ids(tokenizer_path)
    vocab_size = max(ids_of.values()) + 1
    texts = build_texts(rng)
    decode_seqs = build_decode_ids(rng, ids_of.get, vocab_size)
    tok = None
    if not texts_only:
        from tokenizers import Tokenizer  # only needed for the expected values
        tok = Tokenizer.from_file(tokenizer_path)
        special_ids = {tok.token_to_id(c) for c in special_contents}
        plain_supported = hasattr(tok, "encode_special_tokens")
        if not plain_supported:
            print("make_tokenizer_cases: this tokenizers has no encode_special_tokens; no ids_plain", file=sys.stderr)
    lines, skipped = [], 0
    for text in texts:
        if texts_only:
            lines.append({"text": text})
            continue
        ids = tok.encode(text, add_special_tokens=False).ids
        line = {"text": text, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)}
        if plain_supported and any(c in text for c in special_contents):
            tok.encode_special_tokens = True
            line["ids_plain"] = tok.encode(text, add_special_tokens=False).ids
            tok.encode_special_tokens = False
        if special_ids.intersection(ids):
            line["decoded_skip"] = tok.decode(ids, skip_special_tokens=True)
        lines.append(line)
    for seq in decode_seqs:
        if texts_only:
            lines.append({"decode_ids": seq})
            continue
        try:
            lines.append({"decode_ids": seq, "decoded": tok.decode(seq, skip_special_tokens=False),
                          "decoded_skip": tok.decode(seq, skip_special_tokens=True)})
        except Exception as e:  # an id the library refuses: leave the case out
            skipped += 1
            print(f"make_tokenizer_cases: skipped decode case {seq[:8]}...: {e}", file=sys.stderr)
    with open(out_path, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    n_text = len(texts)
    print(f"make_tokenizer_cases: wrote {out_path}: {n_text} texts, {len(decode_seqs) - skipped} decode cases",
          file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True, help="tokenizer.json to run")
    ap.add_argument("--out", required=True, help="output .jsonl")
    ap.add_argument("--extra-tokenizer", help="a second tokenizer.json (e.g. models/dg-tiny/tokenizer.json)")
    ap.add_argument("--extra-out", help="output .jsonl for --extra-tokenizer")
    ap.add_argument("--texts-only", action="store_true", help="write the inputs only (no `tokenizers` needed)")
    args = ap.parse_args()
    if bool(args.extra_tokenizer) != bool(args.extra_out):
        ap.error("--extra-tokenizer and --extra-out go together")
    write_cases(args.tokenizer, args.out, args.texts_only)
    if args.extra_tokenizer:
        write_cases(args.extra_tokenizer, args.extra_out, args.texts_only)


if __name__ == "__main__":
    main()
