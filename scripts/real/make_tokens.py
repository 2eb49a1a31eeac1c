#!/usr/bin/env python3
"""Random GPT-2 token data for real training programs that gmprof is validated on.

Neither program's data preparation can run on the GPU machine (it has no network), and the
profile does not depend on what the tokens say, so both get random tokens of GPT-2's vocabulary:

  make_tokens.py llmc DIR      DIR/train.bin, DIR/val.bin in llm.c's shard format
                               (int32 header[256]: magic 20240520, version 1, token count;
                               then uint16 tokens), as llmc/dataloader.h reads them
  make_tokens.py nanogpt DIR   DIR/train.bin, DIR/val.bin as nanoGPT's train.py reads them
                               (bare uint16 tokens, np.memmap)

--tokens N sets the token count per train file (val gets a tenth). Deterministic (seed 1234).
"""
import argparse
import os
import random
import struct

VOCAB = 50257


def tokens(n: int, rng: random.Random) -> bytes:
    return struct.pack("<%dH" % n, *(rng.randrange(VOCAB) for _ in range(n)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("format", choices=["llmc", "nanogpt"])
    ap.add_argument("dir")
    ap.add_argument("--tokens", type=int, default=1 << 20)
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    rng = random.Random(1234)
    for name, n in (("train.bin", args.tokens), ("val.bin", max(args.tokens // 10, 1 << 16))):
        with open(os.path.join(args.dir, name), "wb") as f:
            if args.format == "llmc":
                header = [0] * 256
                header[0], header[1], header[2] = 20240520, 1, n
                f.write(struct.pack("<256i", *header))
            f.write(tokens(n, rng))
        print("wrote %s (%d tokens)" % (os.path.join(args.dir, name), n))


if __name__ == "__main__":
    main()
