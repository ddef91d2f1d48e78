#!/usr/bin/env python3
"""megac data's token ids against the libraries that define them, on a few MB of mixed text (the
machine's license and copyright texts, paragraph by paragraph, and a JSON-lines file with two
keys and unicode): GPT-2 byte-level BPE (vocab.json + merges.txt trained here) against Hugging
Face tokenizers and, on the license texts, transformers' pure-Python GPT2Tokenizer; BERT's
WordPiece (a vocab.txt trained here, lower case and cased) against tokenizers and, on the license
texts, transformers' pure-Python BertTokenizer; a
tokenizer.json (Unigram, a BOS added by its post-processor) against tokenizers; SentencePiece
(a model trained here) against sentencepiece; the byte tokenizer's Python path against its C++
one. A checkpoint trained on each carries the tokenizer: transformers' AutoTokenizer loads the
iteration folder and encodes as the library does. Each dataset is read back with megatron-core's own IndexedDataset (0.12.1, loaded by path),
some are byte for byte what its IndexedDatasetBuilder writes, and --workers 2 writes the same
bytes as --workers 1.

Runs under build/pyenv's python (tokenizers, sentencepiece, transformers, megatron-core):
    tokenizer_ids.py --megac build/bin/megac --spec examples/gpt2-tiny.yaml --workdir DIR
"""
import argparse
import glob
import importlib.util
import json
import os
import re
import shutil
import sys
import types

import numpy as np
import sentencepiece
import tokenizers
from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import BertTokenizer, GPT2Tokenizer

from e2e_util import run

CORPUS_BYTES = 3 << 20
UNICODE = ["naïve café — déjà vu", "東京都の天気は晴れです。", "🚀 launch 👩‍👩‍👧 family", "Ελληνικά και русский",
           "مرحبا بالعالم", "e\u0301 combining, ﬁ ligature, \u00a0nbsp", "tab\tand\r\nCRLF", ""]


def megatron_indexed_dataset():
    """megatron-core's indexed_dataset module; its package __init__ needs a newer torch, so the
    module is loaded by path with its two imports from the package stubbed."""
    root = importlib.util.find_spec("megatron").submodule_search_locations[0]
    stubs = {"megatron": {}, "megatron.core": {}, "megatron.core.datasets": {},
             "megatron.core.utils": {"log_single_rank": lambda *a, **k: None},
             "megatron.core.datasets.utils_s3": {"S3Config": object, "is_s3_path": lambda path: False,
                                                 "maybe_download_file": None, "object_exists": None,
                                                 "parse_s3_path": None}}
    for name, attrs in stubs.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        sys.modules[name] = module
    spec = importlib.util.spec_from_file_location("indexed_dataset", root + "/core/datasets/indexed_dataset.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_documents(IndexedDataset, prefix):
    ds = IndexedDataset(prefix)
    assert len(ds.document_indices) - 1 == len(ds), "one sequence per document"
    return [ds[i].astype(np.int64).tolist() for i in range(len(ds))]


def make_corpus(workdir):
    """Text files (licenses first, then copyright files up to CORPUS_BYTES) and a JSON-lines file."""
    licenses = sorted(p for p in glob.glob("/usr/share/common-licenses/*") if os.path.isfile(p))
    texts, total = list(licenses), sum(os.path.getsize(p) for p in licenses)
    for path in sorted(glob.glob("/usr/share/doc/*/copyright")):
        if total > CORPUS_BYTES:
            break
        try:
            with open(path, encoding="utf-8") as f:
                f.read()
        except (UnicodeDecodeError, OSError):
            continue
        texts.append(path)
        total += os.path.getsize(path)
    jsonl = os.path.join(workdir, "mixed.jsonl")
    with open(jsonl, "w", encoding="utf-8") as f:
        paragraphs = []
        for path in licenses:
            with open(path, encoding="utf-8") as lic:
                paragraphs += [p for p in lic.read().split("\n\n") if p.strip()]
        for i, p in enumerate(paragraphs):
            extra = UNICODE[i % len(UNICODE)]
            f.write(json.dumps({"text": p + " " + extra, "title": extra, "id": i}, ensure_ascii=i % 2 == 0) + "\n")
    return licenses, texts, jsonl, total


def train_tokenizers(workdir, texts):
    gpt2 = tokenizers.ByteLevelBPETokenizer()
    gpt2.train(texts, vocab_size=3000, special_tokens=["<|endoftext|>"], show_progress=False)
    gpt2.save_model(workdir, "gpt2")
    unigram = tokenizers.Tokenizer(models.Unigram())
    unigram.normalizer = normalizers.NFKC()
    unigram.pre_tokenizer = pre_tokenizers.Metaspace()
    unigram.decoder = decoders.Metaspace()
    unigram.train(texts, trainers.UnigramTrainer(vocab_size=2000, special_tokens=["<unk>", "<s>", "</s>"],
                                                 unk_token="<unk>", show_progress=False))
    unigram.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[
        ("<s>", unigram.token_to_id("<s>"))])
    folder = os.path.join(workdir, "unigram")
    os.makedirs(folder, exist_ok=True)
    unigram.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": "</s>"}, f)
    wordpiece = tokenizers.BertWordPieceTokenizer(lowercase=True)
    wordpiece.train(texts, vocab_size=2500, show_progress=False)  # [PAD] [UNK] [CLS] [SEP] [MASK] first
    wordpiece.save_model(workdir, "wordpiece")
    sentencepiece.SentencePieceTrainer.train(input=",".join(texts[:12]), model_prefix=os.path.join(workdir, "sp"),
                                             vocab_size=1500, model_type="bpe", byte_fallback=True,
                                             minloglevel=2)
    return folder


def paragraphs_of(megac, IndexedDataset, workdir, texts):
    """The documents megac's C++ reader makes of the text files with --split-paragraphs, from its
    byte tokenizer's dataset: what each library tokenizer must be given."""
    prefix = os.path.join(workdir, "bytes")
    run([megac, "data", *sum((["--input", t] for t in texts), []), "--split-paragraphs", "--output-prefix", prefix])
    docs = read_documents(IndexedDataset, prefix)
    assert all(d[-1] == 256 for d in docs)
    return [bytes(d[:-1]).decode("utf-8") for d in docs], docs


def same_files_as_megatron(megatron, prefix, documents, vocab_size):
    """megatron-core's IndexedDatasetBuilder given the same documents (as its preprocess_data.py
    gives them: an empty document adds no sequence) writes byte for byte megac's PREFIX.bin/.idx."""
    dtype = np.uint16 if vocab_size < 65500 else np.int32  # its DType.optimal_dtype
    theirs = prefix + "-megatron"
    builder = megatron.IndexedDatasetBuilder(theirs + ".bin", dtype=dtype)
    for doc in documents:
        builder.add_document(np.array(doc, dtype=np.int64), [len(doc)] if doc else [])
    builder.finalize(theirs + ".idx")
    for ext in (".bin", ".idx"):
        with open(prefix + ext, "rb") as a, open(theirs + ext, "rb") as b:
            if a.read() != b.read():
                sys.exit(f"FAIL {prefix}{ext} differs from what megatron-core's IndexedDatasetBuilder writes")
    print(f"ok   {os.path.basename(prefix)}: .bin and .idx byte for byte as megatron-core's IndexedDatasetBuilder")


def checkpoint_token_ids(folder, name, eos, bos):
    """The checkpoint states the tokenizer's eos and bos ids (None: it has none) in config.json,
    generation_config.json (as transformers writes it for that config) and, where transformers
    has a class for the tokenizer, as AutoTokenizer's eos_token and bos_token."""
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig
    config = AutoConfig.from_pretrained(folder)
    generation = GenerationConfig.from_pretrained(folder)
    with open(os.path.join(folder, "generation_config.json")) as f:
        written = json.load(f)
    expected = json.loads(GenerationConfig.from_model_config(config).to_json_string())
    got = [config.eos_token_id, config.bos_token_id, generation.eos_token_id, generation.bos_token_id]
    if os.path.exists(os.path.join(folder, "tokenizer_config.json")):
        tok = AutoTokenizer.from_pretrained(folder, use_fast=name != "SentencePieceTokenizer")
        got += [tok.eos_token_id, tok.bos_token_id if tok.bos_token is not None else None]
    if got != [eos, bos] * (len(got) // 2) or written != expected:
        sys.exit(f"FAIL {name}: the checkpoint states eos/bos {got} (config.json, generation_config.json, "
                 f"AutoTokenizer), expected {eos}/{bos}; generation_config.json {written}, transformers' {expected}")
    print(f"ok   {name}: the checkpoint states eos {eos} and bos {bos} in config.json, generation_config.json"
          + (" and tokenizer_config.json" if len(got) > 4 else " (no tokenizer_config.json: no transformers class)"))


def checkpoint_tokenizers(args, cases, texts, special_ids):
    """Trains one iteration on each library tokenizer's dataset and saves; AutoTokenizer loads
    the checkpoint folder (megac_tokenizer.json, the tokenizer's files in Hugging Face's layout
    and tokenizer_config.json) and encodes `texts` as the library does; the folder states the
    tokenizer's special tokens (checkpoint_token_ids)."""
    from transformers import AutoTokenizer
    w = lambda *p: os.path.join(args.workdir, *p)
    with open(args.spec) as f:  # the spec, with room for every vocabulary trained here
        spec = re.sub(r"^vocab_size:.*$", "vocab_size: 3072", f.read(), flags=re.M)
    with open(w("spec-3072.yaml"), "w") as f:
        f.write(spec)
    run([args.megac, "compile", w("spec-3072.yaml"), "--micro-batch-size", "2", "-o", w("prog")])
    for kind, (_, encode, _) in cases.items():
        shutil.rmtree(w("ckpt-" + kind), ignore_errors=True)
        run([w("prog", "train"), "--data-path", w(kind), "--train-iters", "1", "--global-batch-size", "2",
             "--lr", "1e-3", "--save", w("ckpt-" + kind)])
        folder = w("ckpt-" + kind, "iter_0000001")
        with open(os.path.join(folder, "megac_tokenizer.json")) as f:
            recorded = json.load(f)["tokenizer_type"]
        # SentencePiece: transformers' own class for it (its conversion to a fast tokenizer is
        # another implementation, which does not read every model alike).
        tok = AutoTokenizer.from_pretrained(folder, use_fast=kind != "SentencePieceTokenizer")
        # BERT's tokenizer adds [CLS] and [SEP] to a text by default; megac data adds none.
        bert = kind.startswith("BertWordPiece")
        got = [tok.encode(t, add_special_tokens=not bert) for t in texts]
        compare(f"{kind} from the checkpoint ({type(tok).__name__}, recorded {recorded})", got,
                [encode(t) for t in texts])
        checkpoint_token_ids(folder, kind, *special_ids[kind])
    shutil.rmtree(w("ckpt-bytes"), ignore_errors=True)
    run([w("prog", "train"), "--data-path", w("bytes"), "--train-iters", "1", "--global-batch-size", "2",
         "--lr", "1e-3", "--save", w("ckpt-bytes")])
    checkpoint_token_ids(w("ckpt-bytes", "iter_0000001"), "ByteTokenizer", *special_ids["ByteTokenizer"])


def compare(name, got, expected):
    if len(got) != len(expected):
        sys.exit(f"FAIL {name}: {len(got)} documents, expected {len(expected)}")
    for i, (g, e) in enumerate(zip(got, expected)):
        if g != e:
            first = next(j for j in range(min(len(g), len(e)) + 1) if j == min(len(g), len(e)) or g[j] != e[j])
            sys.exit(f"FAIL {name}: document {i} differs at token {first}: got {g[first:first + 8]}, "
                     f"expected {e[first:first + 8]}")
    print(f"ok   {name}: {len(got)} documents, {sum(map(len, got))} tokens equal")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--spec", required=True, help="a GPT-2 spec (its vocab_size is raised to 3072)")
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    os.environ["MEGAC_PYTHON"] = sys.executable  # megac data's tokenizer runs in this python
    megatron = megatron_indexed_dataset()
    IndexedDataset = megatron.IndexedDataset
    licenses, texts, jsonl, total = make_corpus(args.workdir)
    print(f"corpus: {len(texts)} text files, {total / 1e6:.1f} MB, and {jsonl}")
    unigram_folder = train_tokenizers(args.workdir, texts)
    paragraphs, byte_docs = paragraphs_of(args.megac, IndexedDataset, args.workdir, texts)
    with open(jsonl, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]

    vocab, merges = (os.path.join(args.workdir, n) for n in ("gpt2-vocab.json", "gpt2-merges.txt"))
    bpe = tokenizers.Tokenizer(models.BPE.from_file(vocab, merges))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    unigram = tokenizers.Tokenizer.from_file(os.path.join(unigram_folder, "tokenizer.json"))
    sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(args.workdir, "sp.model"))
    wordpiece_vocab = os.path.join(args.workdir, "wordpiece-vocab.txt")
    uncased, cased = (tokenizers.BertWordPieceTokenizer(wordpiece_vocab, lowercase=lower) for lower in (True, False))
    cases = {  # flags, reference encode, end-of-document id
        "GPT2BPETokenizer": (["--vocab-file", vocab, "--merge-file", merges], lambda t: bpe.encode(t).ids,
                             bpe.token_to_id("<|endoftext|>")),
        "HuggingFaceTokenizer": (["--tokenizer-model", unigram_folder], lambda t: unigram.encode(t).ids,
                                 unigram.token_to_id("</s>")),
        "SentencePieceTokenizer": (["--tokenizer-model", os.path.join(args.workdir, "sp.model")], sp.encode,
                                   sp.eos_id()),
        # BERT's WordPiece: no [CLS] or [SEP] added to a document; [SEP] ends it.
        "BertWordPieceLowerCase": (["--vocab-file", wordpiece_vocab],
                                   lambda t: uncased.encode(t, add_special_tokens=False).ids,
                                   uncased.token_to_id("[SEP]")),
        "BertWordPieceCase": (["--vocab-file", wordpiece_vocab],
                              lambda t: cased.encode(t, add_special_tokens=False).ids, cased.token_to_id("[SEP]")),
    }
    for kind, (flags, encode, eod) in cases.items():
        prefix = os.path.join(args.workdir, kind)
        out = run([args.megac, "data", "--tokenizer-type", kind, *flags, *sum((["--input", t] for t in texts), []),
                   "--split-paragraphs", "--output-prefix", prefix, "--workers", "2"])
        check_bytes_read(out, texts, f"{kind}, text paragraphs")
        compare(f"{kind}, text paragraphs", read_documents(IndexedDataset, prefix),
                [encode(p) + [eod] for p in paragraphs])
        with open(prefix + ".tokenizer.json") as f:
            record = json.load(f)
        assert record["tokenizer_type"] == kind and record["eod"] == eod, record
        out = run([args.megac, "data", "--tokenizer-type", kind, *flags, "--input", jsonl, "--json-keys",
                   "text,title", "--output-prefix", prefix + "-json"])
        check_bytes_read(out, [jsonl], f"{kind}, JSON lines")
        for key in ("text", "title"):
            compare(f"{kind}, JSON key {key}", read_documents(IndexedDataset, f"{prefix}-json_{key}_document"),
                    [encode(r[key]) + [eod] for r in records])
        same_files_as_megatron(megatron, f"{prefix}-json_title_document", [encode(r["title"]) + [eod] for r in records],
                               record["vocab_size"])

    # Checkpoints carry the tokenizer: transformers' AutoTokenizer loads the iteration folder and
    # encodes as the library did.
    # (eos, bos) of each: GPT-2's one special token is both; the unigram tokenizer's
    # tokenizer_config.json names an eos_token only; the byte tokenizer has no bos.
    special_ids = {"GPT2BPETokenizer": (bpe.token_to_id("<|endoftext|>"), bpe.token_to_id("<|endoftext|>")),
                   "HuggingFaceTokenizer": (unigram.token_to_id("</s>"), None),
                   "SentencePieceTokenizer": (sp.eos_id(), sp.bos_id()), "ByteTokenizer": (256, None),
                   "BertWordPieceLowerCase": (uncased.token_to_id("[SEP]"), None),
                   "BertWordPieceCase": (cased.token_to_id("[SEP]"), None)}
    checkpoint_tokenizers(args, cases, paragraphs[:300] + [r["text"] for r in records], special_ids)

    # The pure-Python GPT-2 tokenizer of transformers, an implementation apart from tokenizers'.
    slow = GPT2Tokenizer(vocab, merges)
    license_paragraphs = paragraphs_of(args.megac, IndexedDataset, args.workdir, licenses)[0]
    prefix = os.path.join(args.workdir, "gpt2-licenses")
    run([args.megac, "data", "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", vocab, "--merge-file", merges,
         *sum((["--input", t] for t in licenses), []), "--split-paragraphs", "--output-prefix", prefix,
         "--append-eod=false"])
    expected = [slow.encode(p) for p in license_paragraphs]
    compare("GPT2BPETokenizer vs transformers' GPT2Tokenizer, licenses", read_documents(IndexedDataset, prefix),
            expected)
    same_files_as_megatron(megatron, prefix, expected, len(slow))

    # The pure-Python BERT tokenizer of transformers, an implementation apart from tokenizers'.
    slow_bert = BertTokenizer(wordpiece_vocab, do_lower_case=True)
    prefix = os.path.join(args.workdir, "wordpiece-licenses")
    run([args.megac, "data", "--tokenizer-type", "BertWordPieceLowerCase", "--vocab-file", wordpiece_vocab,
         *sum((["--input", t] for t in licenses), []), "--split-paragraphs", "--output-prefix", prefix,
         "--append-eod=false"])
    compare("BertWordPieceLowerCase vs transformers' BertTokenizer, licenses", read_documents(IndexedDataset, prefix),
            [slow_bert.encode(p, add_special_tokens=False) for p in license_paragraphs])

    # The byte tokenizer read by Python (JSON lines) against the C++ reader's (text), into a
    # folder that does not exist yet (megac data makes it).
    shutil.rmtree(os.path.join(args.workdir, "made"), ignore_errors=True)
    prefix = os.path.join(args.workdir, "made", "here", "bytes-json")
    with open(os.path.join(args.workdir, "paragraphs.jsonl"), "w", encoding="utf-8") as f:
        for p in paragraphs:
            f.write(json.dumps({"text": p}) + "\n")
    check_bytes_read(run([args.megac, "data", "--input", f.name, "--output-prefix", prefix]), [f.name],
                     "ByteTokenizer, JSON lines into a new folder")
    compare("ByteTokenizer, Python's JSON reader vs C++'s text reader",
            read_documents(IndexedDataset, prefix + "_text_document"), byte_docs)

    # --workers 2 and 1 write the same bytes.
    one = os.path.join(args.workdir, "SentencePieceTokenizer-one")
    run([args.megac, "data", "--tokenizer-type", "SentencePieceTokenizer", "--tokenizer-model",
         os.path.join(args.workdir, "sp.model"), *sum((["--input", t] for t in texts), []), "--split-paragraphs",
         "--output-prefix", one, "--workers", "1"])
    for ext in (".bin", ".idx"):
        with open(one + ext, "rb") as a, open(os.path.join(args.workdir, "SentencePieceTokenizer") + ext, "rb") as b:
            if a.read() != b.read():
                sys.exit(f"FAIL --workers 1 and 2 wrote different {ext} files")
    print("ok   --workers 1 and --workers 2 write the same .bin and .idx")


def check_bytes_read(out, inputs, what):
    """megac data's closing progress line counts the input's bytes (not its tokens)."""
    size = sum(os.path.getsize(p) for p in inputs)
    m = re.search(r"megac data: read (\d+) bytes \((\d+)% of the input\)", out)
    if not m or int(m.group(1)) != size or m.group(2) != "100":
        sys.exit(f"FAIL {what}: megac data's progress should read {size} bytes (the inputs' size), said: "
                 f"{m.group(0) if m else out[-500:]}")
    print(f"ok   {what}: the progress counted {size} bytes, the inputs' size")


if __name__ == "__main__":
    main()
