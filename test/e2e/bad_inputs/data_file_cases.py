"""Datasets (--data-path PREFIX: PREFIX.bin + PREFIX.idx, Megatron's format)."""
from bad_inputs import files
from bad_inputs.case import Case

AREA = "data files"


def data_case(name, expect, idx=None, bin_=None, flags=(), tokenizer=None):
    content = {} if tokenizer is None else {"d.tokenizer.json": tokenizer}
    if idx is not None:
        content["d.idx"] = idx
    if bin_ is not None:
        content["d.bin"] = bin_
    return Case(AREA, name, ["{train}", "--data-path", "{scratch}/d", "--lr", "1e-3", "--train-iters", "2",
                             "--save", "{scratch}/ck", "--metrics-file", "{scratch}/m.jsonl"] + list(flags),
                expect, absent=["{scratch}/ck", "{scratch}/m.jsonl"], files=content)


GOOD_TOKENS = list(range(200)) * 2


def blend_case(name, data_flags, expect):
    return Case(AREA, name, ["{train}", *data_flags, "--lr", "1e-3", "--train-iters", "2", "--save", "{scratch}/ck",
                             "--metrics-file", "{scratch}/m.jsonl"], expect, absent=["{scratch}/ck", "{scratch}/m.jsonl"])


def cases():
    good_idx = files.dataset_idx([400])
    return [
        # Issue [15]: files that are not files, shares that vanish, signs that were dropped.
        data_case("index is a pipe", r"d\.idx is not a regular file \(a pipe \(FIFO\)\)",
                  idx=files.Fifo(), bin_=files.dataset_bin(GOOD_TOKENS)),
        data_case("index is /dev/zero", r"d\.idx is not a regular file \(a character device\)",
                  idx=files.Link("/dev/zero"), bin_=files.dataset_bin(GOOD_TOKENS)),
        data_case("tokens are a folder", r"d\.bin is not a regular file \(a folder\)",
                  idx=files.dataset_idx([400]), bin_=files.Folder()),
        blend_case("blend weight of 1e308", ["--data-path", "1e308", "{data}", "0.5", "{data}"],
                   r"--data-path: the weight of .* is 5e-309 of the total, so it would give no sample"),
        blend_case("blend weights past a double", ["--data-path", "1e308", "{data}", "1e308", "{data}"],
                   r"--data-path: the weights add up to more than a double holds"),
        blend_case("split with a negative share", ["--data-path", "{data}", "--split", "90,-5,5"],
                   r"--split 90,-5,5: the parts must not be negative"),
        blend_case("blend with a weight missing", ["--data-path", "0.3", "{data}", "{data}"],
                   r"--data-path: 0\.3 looks like a weight, but the values are not weight-prefix pairs"),
        blend_case("blend with a negative weight", ["--data-path", "-0.5", "{data}", "1", "{data}"],
                   r"--data-path: weight -0\.5 of .* is negative"),
        blend_case("blend of zero weights", ["--data-path", "0", "{data}", "0", "{data}"],
                   r"--data-path: the weights add up to 0"),
        Case(AREA, "blend of two tokenizers", ["{train}", "--data-path", "{scratch}/a", "{scratch}/b", "--lr", "1e-3",
                                                "--train-iters", "1", "--metrics-file", "{scratch}/m.jsonl"],
             r"--data-path: .*b\.tokenizer\.json and .*a\.tokenizer\.json name different tokenizers",
             absent=["{scratch}/m.jsonl"],
             files={"a.idx": files.dataset_idx([400]), "a.bin": files.dataset_bin(GOOD_TOKENS),
                    "b.idx": files.dataset_idx([400]), "b.bin": files.dataset_bin(GOOD_TOKENS),
                    "a.tokenizer.json": '{"tokenizer_type": "ByteTokenizer", "vocab_size": 257}',
                    "b.tokenizer.json": '{"tokenizer_type": "SentencePieceTokenizer", "vocab_size": 200}'}),
        blend_case("blend with a missing dataset", ["--data-path", "0.5", "{data}", "0.5", "{scratch}/none"],
                   r"none\.idx: not found"),
        # Issue [16]: a dataset repeats for as many epochs as the blend draws from it, but one
        # with no sample cannot give even one.
        Case(AREA, "blend with a dataset without one sample",
             ["{train}", "--data-path", "0.5", "{data}", "0.5", "{scratch}/tiny", "--lr", "1e-3", "--train-iters", "2",
              "--metrics-file", "{scratch}/m.jsonl"],
             r"--data-path: .*tiny must give 2 of the blend's first 4 samples \(weight 0\.5\d*\), but has not one "
             r"sample of 32\+1 tokens \(10 tokens in documents 0\.\.1\); leave it out of --data-path",
             absent=["{scratch}/m.jsonl"],
             files={"tiny.idx": files.dataset_idx([10]), "tiny.bin": files.dataset_bin(GOOD_TOKENS[:10])}),
        data_case("dataset without one sample", r"d: documents 0\.\.1 hold 32 tokens, fewer than one sample of "
                  r"32\+1 tokens; use more data, or compile a spec with a smaller seq_length",
                  idx=files.dataset_idx([32]), bin_=files.dataset_bin(GOOD_TOKENS[:32])),
        blend_case("split with no training share", ["--data-path", "{data}", "--split", "0,1,0"],
                   r"--split 0,1,0 gives training no documents"),
        blend_case("split of four parts", ["--data-path", "{data}", "--split", "1,2,3,4"],
                   r"--split 1,2,3,4: needs one to three numbers"),
        blend_case("data path and train data path", ["--data-path", "{data}", "--train-data-path", "{data}"],
                   r"--data-path excludes --train-data-path"),
        blend_case("valid data path alone", ["--data-path", "{data}", "--valid-data-path", "{data}"],
                   r"--valid-data-path requires --train-data-path"),
        blend_case("split with train data path", ["--train-data-path", "{data}", "--split", "9,1"],
                   r"--split requires --data-path"),
        data_case("no dataset", r"d\.idx: not found"),
        data_case("idx but no bin", r"d\.bin", idx=good_idx),
        data_case("idx truncated", r"d\.idx: truncated", idx=good_idx[:40], bin_=files.dataset_bin(GOOD_TOKENS)),
        data_case("idx bad magic", r"d\.idx", idx=files.dataset_idx([400], magic=b"NOTANIDX\x00"),
                  bin_=files.dataset_bin(GOOD_TOKENS)),
        data_case("idx version 2", r"d\.idx.*version", idx=files.dataset_idx([400], version=2),
                  bin_=files.dataset_bin(GOOD_TOKENS)),
        data_case("idx unknown dtype", r"d\.idx.*dtype", idx=files.dataset_idx([400], dtype_code=42),
                  bin_=files.dataset_bin(GOOD_TOKENS)),
        data_case("bin shorter than the idx says", r"d\.bin", idx=good_idx, bin_=files.dataset_bin(GOOD_TOKENS[:100])),
        data_case("token outside the vocabulary", r"token id 1000 at position 5 is outside the compiled vocabulary",
                  idx=good_idx, bin_=files.dataset_bin(GOOD_TOKENS[:5] + [1000] + GOOD_TOKENS[6:])),
        data_case("tokenizer larger than the model's vocabulary",
                  r"--data-path .*d was tokenized by GPT2BPETokenizer with a vocabulary of 50257 .*compile a spec "
                  r"with vocab_size >= 50257", idx=good_idx, bin_=files.dataset_bin(GOOD_TOKENS),
                  tokenizer='{"tokenizer_type": "GPT2BPETokenizer", "vocab_size": 50257, "eod": 50256}'),
        data_case("tokenizer file gone before a save", r"d\.tokenizer\.json: vocab_file /nonexistent/vocab\.json: "
                  r"cannot read it", idx=good_idx, bin_=files.dataset_bin(GOOD_TOKENS),
                  tokenizer='{"tokenizer_type": "GPT2BPETokenizer", "vocab_size": 257, '
                            '"files": {"vocab_file": "/nonexistent/vocab.json"}}'),
        data_case("tokenizer record without its vocab_size", r"d\.tokenizer\.json: needs a string tokenizer_type and "
                  r"an integer vocab_size", idx=good_idx, bin_=files.dataset_bin(GOOD_TOKENS),
                  tokenizer='{"tokenizer_type": "GPT2BPETokenizer"}'),
        data_case("empty dataset", r"d: documents 0\.\.0 hold 0 tokens, fewer than one sample of 32\+1 tokens",
                  idx=files.dataset_idx([]), bin_=b""),
        data_case("a sequence of 2^31 tokens", r"d\.idx", idx=files.dataset_idx([2147483647]),
                  bin_=files.dataset_bin(GOOD_TOKENS)),
    ]
