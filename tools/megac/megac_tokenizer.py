"""megac's tokenizers, from the libraries that define them, and megac data's reader for them.

Tokenizer types carry Megatron's names: GPT2BPETokenizer (vocab.json + merges.txt, through Hugging
Face `tokenizers`), BertWordPieceLowerCase and BertWordPieceCase (BERT's vocab.txt, through
`tokenizers`), HuggingFaceTokenizer (a tokenizer.json, or a folder holding one), and
SentencePieceTokenizer (a .model, through `sentencepiece`), besides megac's ByteTokenizer.

`megac generate` runs `encode` and `decode` with the tokenizer a model folder carries. `megac data`
runs `encode-corpus` and reads its standard output: one JSON line describing the
tokenizer, then per document and JSON key a record (uint32 key index, uint64 count, count int32
ids, little-endian), then a closing record with key index 0xFFFFFFFF. An error is one line on
standard error starting "megac data: error:", exit status 1, and no closing record.
"""
import argparse
import array
import json
import multiprocessing
import os
import struct
import sys
import time

END = 0xFFFFFFFF
RECORD = struct.Struct("<IQ")
# A document (a JSON line, a paragraph or a file) is held in memory whole: refuse longer ones.
DOCUMENT_LIMIT = 1 << 26
EOD_CANDIDATES = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|eot_id|>")


class Failure(Exception):
    pass


def special_tokens(**contents):
    """{role: {"id", "content"}} of the tokens a tokenizer gives a role (bos_token, eos_token,
    pad_token): contents maps a role to (id, text); a role whose id is None is left out, none is
    made up. Checkpoints state them (config.json's bos_token_id, tokenizer_config.json's eos_token)."""
    return {role: {"id": i, "content": text} for role, (i, text) in contents.items() if i is not None}


class ByteTokenizer:
    """Every UTF-8 byte is a token; 256 ends a document (megart/byte_tokenizer.h); no bos."""

    def __init__(self):
        self.vocab_size, self.eod, self.files = 257, 256, {}
        self.special_tokens = special_tokens(eos_token=(256, None))

    def encode(self, text):
        return list(text.encode("utf-8"))

    def decode(self, ids):
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


class HuggingFaceTokenizer:
    """A `tokenizers` Tokenizer; encode adds what its post-processor adds (a BOS, for Llama's)."""

    def __init__(self, tokenizer, files, eod_token=None, declared=None):
        """eod_token: the end of document (else the first of EOD_CANDIDATES in the vocabulary), also
        its eos; declared: the bos_token and pad_token its tokenizer_config.json names."""
        self.tok, self.files = tokenizer, files
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        vocab = tokenizer.get_vocab(with_added_tokens=True)
        names = [eod_token] if eod_token else [n for n in EOD_CANDIDATES if n in vocab]
        self.eod = vocab.get(names[0]) if names else None
        named = lambda text: (vocab.get(text), text)
        declared = declared or {}
        self.special_tokens = special_tokens(bos_token=named(declared.get("bos_token")),
                                             eos_token=(self.eod, names[0] if names else None),
                                             pad_token=named(declared.get("pad_token")))

    def encode(self, text):
        return self.tok.encode(text).ids

    def decode(self, ids):
        return self.tok.decode(ids, skip_special_tokens=False)


class BertWordPieceTokenizer(HuggingFaceTokenizer):
    """BERT's WordPiece over a vocab.txt, as Megatron's BertWordPieceLowerCase / BertWordPieceCase
    and transformers' BertTokenizer split text: BERT's normalizer (clean-up, CJK characters apart,
    lower case and accents stripped for the uncased), BERT's pre-tokenizer, no special token added.
    [SEP] ends a document; [CLS], [MASK] and [PAD] are recorded for the masked-LM data."""

    ROLES = {"cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]", "pad_token": "[PAD]",
             "unk_token": "[UNK]"}

    def __init__(self, tokenizers, vocab_file, lower_case):
        tok = tokenizers.Tokenizer(tokenizers.models.WordPiece.from_file(vocab_file, unk_token="[UNK]"))
        tok.normalizer = tokenizers.normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                               strip_accents=None, lowercase=lower_case)
        tok.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
        tok.decoder = tokenizers.decoders.WordPiece()
        vocab = tok.get_vocab()
        missing = [t for t in self.ROLES.values() if t not in vocab]
        if missing:
            raise Failure(f"--vocab-file {vocab_file}: a BERT vocabulary has {', '.join(missing)}; this one does not: "
                          f"give the vocab.txt of a BERT model")
        super().__init__(tok, {"wordpiece_vocab": vocab_file}, "[SEP]")
        self.lower_case = lower_case
        self.special_tokens.update(special_tokens(**{role: (vocab[text], text) for role, text in self.ROLES.items()}))


class SentencePieceTokenizer:
    def __init__(self, model_file):
        import sentencepiece
        self.sp = sentencepiece.SentencePieceProcessor(model_file=model_file)
        self.files = {"tokenizer_model": model_file}
        self.vocab_size = self.sp.get_piece_size()
        self.eod = self.sp.eos_id() if self.sp.eos_id() >= 0 else None
        piece = lambda i: (i, self.sp.id_to_piece(i)) if i >= 0 else (None, None)  # -1: the model has none
        self.special_tokens = special_tokens(bos_token=piece(self.sp.bos_id()), eos_token=piece(self.sp.eos_id()),
                                             pad_token=piece(self.sp.pad_id()))

    def encode(self, text):
        return self.sp.encode(text)

    def decode(self, ids):
        return self.sp.decode(ids)


def need_file(flag, path, tokenizer_type):
    if not path:
        raise Failure(f"--tokenizer-type {tokenizer_type} needs {flag} FILE")
    if not os.path.isfile(path):
        raise Failure(f"{flag} {path}: no such file")
    return os.path.abspath(path)


def import_library(name, tokenizer_type):
    try:
        return __import__(name)
    except ImportError:
        raise Failure(f"--tokenizer-type {tokenizer_type} needs the Python package '{name}', which "
                      f"{sys.executable} cannot import; run scripts/python_env.sh (it installs the pinned "
                      f"version into build/pyenv) or set MEGAC_PYTHON to a python that has it")


def load(tokenizer_type, vocab_file=None, merge_file=None, tokenizer_model=None):
    if tokenizer_type == "ByteTokenizer":
        return ByteTokenizer()
    if tokenizer_type == "GPT2BPETokenizer":
        vocab, merges = need_file("--vocab-file", vocab_file, tokenizer_type), need_file("--merge-file", merge_file,
                                                                                         tokenizer_type)
        tokenizers = import_library("tokenizers", tokenizer_type)
        tok = tokenizers.Tokenizer(tokenizers.models.BPE.from_file(vocab, merges))
        # GPT-2's byte-level BPE: bytes mapped to printable characters, split by GPT-2's pattern.
        tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = tokenizers.decoders.ByteLevel()
        # GPT-2's one special token is its bos and its eos (GPT2Tokenizer's defaults).
        return HuggingFaceTokenizer(tok, {"vocab_file": vocab, "merge_file": merges}, "<|endoftext|>",
                                    {"bos_token": "<|endoftext|>"})
    if tokenizer_type in ("BertWordPieceLowerCase", "BertWordPieceCase"):
        vocab = need_file("--vocab-file", vocab_file, tokenizer_type)
        tokenizers = import_library("tokenizers", tokenizer_type)
        try:
            return BertWordPieceTokenizer(tokenizers, vocab, tokenizer_type == "BertWordPieceLowerCase")
        except Failure:
            raise
        except Exception as e:
            raise Failure(f"--vocab-file {vocab}: not a WordPiece vocab.txt ({e})")
    if tokenizer_type == "HuggingFaceTokenizer":
        if tokenizer_model and os.path.isdir(tokenizer_model):
            tokenizer_model = os.path.join(tokenizer_model, "tokenizer.json")
        path = need_file("--tokenizer-model", tokenizer_model, tokenizer_type)
        tokenizers = import_library("tokenizers", tokenizer_type)
        try:
            tok = tokenizers.Tokenizer.from_file(path)
        except Exception as e:
            raise Failure(f"--tokenizer-model {path}: not a Hugging Face tokenizer.json ({e})")
        files = {"tokenizer_model": path}
        config = os.path.join(os.path.dirname(path), "tokenizer_config.json")
        if os.path.isfile(config):  # checkpoints carry it on (its eos_token, its class)
            files["tokenizer_config"] = config
        declared = declared_tokens(os.path.dirname(path))
        return HuggingFaceTokenizer(tok, files, declared.get("eos_token"), declared)
    if tokenizer_type == "SentencePieceTokenizer":
        path = need_file("--tokenizer-model", tokenizer_model, tokenizer_type)
        import_library("sentencepiece", tokenizer_type)
        try:
            return SentencePieceTokenizer(path)
        except Exception as e:
            raise Failure(f"--tokenizer-model {path}: not a SentencePiece model ({e})")
    raise Failure(f"--tokenizer-type {tokenizer_type}: unknown; use ByteTokenizer, GPT2BPETokenizer, "
                  f"BertWordPieceLowerCase, BertWordPieceCase, HuggingFaceTokenizer or SentencePieceTokenizer")


def declared_tokens(folder):
    """The bos_token, eos_token and pad_token a tokenizer_config.json beside the tokenizer.json
    names, as transformers reads them (a text, or an AddedToken's {"content": ...})."""
    try:
        with open(os.path.join(folder, "tokenizer_config.json")) as f:
            config = json.load(f)
    except (OSError, ValueError):
        return {}
    if not isinstance(config, dict):
        return {}
    text = lambda t: t.get("content") if isinstance(t, dict) else t
    return {role: text(config[role]) for role in ("bos_token", "eos_token", "pad_token")
            if isinstance(text(config.get(role)), str)}


# ---- documents ----

def too_long(path, where):
    return Failure(f"--input {path}: {where} is longer than {DOCUMENT_LIMIT} bytes ({DOCUMENT_LIMIT >> 20} MiB), "
                   f"the most megac data holds in memory at once; cut the text into smaller documents")


def utf8_size(text):
    return len(text.encode("utf-8"))


def text_documents(path, split_paragraphs):
    """A whole file, or each blank-line-separated paragraph (its lines each ending in '\\n'), as
    ([text], bytes of the file it took); ([None], bytes) for trailing blank lines."""
    with open(path, encoding="utf-8", newline="") as f:
        if not split_paragraphs:
            text = f.read(DOCUMENT_LIMIT + 1)
            if len(text) > DOCUMENT_LIMIT:
                raise too_long(path, "the file")
            yield [text], utf8_size(text)
            return
        lines, size, nbytes = [], 0, 0
        for line in iter(lambda: f.readline(DOCUMENT_LIMIT + 1), ""):
            nbytes += utf8_size(line)
            if line.strip(" \t\n\v\f\r"):  # the C++ reader's blank line
                lines.append(line.rstrip("\n") + "\n")
                size += len(lines[-1])
                if size > DOCUMENT_LIMIT:
                    raise too_long(path, "a paragraph")
                continue
            if lines:
                yield ["".join(lines)], nbytes
                nbytes = 0
            lines, size = [], 0
        if lines or nbytes:
            yield (["".join(lines)] if lines else None), nbytes


def json_documents(path, keys):
    """Each line's string fields named by keys, as (values, bytes of the line); (None, bytes) for
    a blank line."""
    with open(path, encoding="utf-8", newline="") as f:
        for number, line in enumerate(iter(lambda: f.readline(DOCUMENT_LIMIT + 1), ""), 1):
            if len(line) > DOCUMENT_LIMIT:
                raise too_long(path, f"line {number}")
            if not line.strip():
                yield None, utf8_size(line)
                continue
            try:
                record = json.loads(line)
            except ValueError as e:
                raise Failure(f"--input {path}: line {number} is not JSON ({e}); each line must be one object "
                              f"such as {{\"text\": \"...\"}}")
            if not isinstance(record, dict):
                raise Failure(f"--input {path}: line {number} is not a JSON object")
            values = []
            for key in keys:
                if not isinstance(record.get(key), str):
                    got = "has no" if key not in record else f"has a {type(record[key]).__name__} for"
                    raise Failure(f"--input {path}: line {number} {got} key \"{key}\"; --json-keys names the "
                                  f"string fields to tokenize (found: {', '.join(sorted(record)) or 'none'})")
                values.append(record[key])
            yield values, utf8_size(line)


def read_documents(args, keys):
    """(values or None, input bytes) for each document of every input, in order."""
    for path in args.input:
        try:
            if args.input_format(path) == "jsonl":
                yield from json_documents(path, keys)
            else:
                yield from text_documents(path, args.split_paragraphs)
        except UnicodeDecodeError as e:
            raise Failure(f"--input {path}: not UTF-8 text ({e})")
        except OSError as e:
            raise Failure(f"--input {path}: cannot read it ({e.strerror})")


# ---- workers ----

_worker_tokenizer = None


def start_worker(spec):
    global _worker_tokenizer
    _worker_tokenizer = load(**spec)


def encode_batch(batch):
    """[(values or None, bytes)] -> [(ids per value or None, bytes)]: the bytes travel with their
    documents, so the progress counts what was encoded, not what the reader ran ahead to."""
    return [(None if values is None else [_worker_tokenizer.encode(v) for v in values], nbytes)
            for values, nbytes in batch]


def batches(documents, size):
    batch = []
    for document in documents:
        batch.append(document)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


class Progress:
    """Documents, input bytes read (of the total), documents/s, MB/s and an ETA on stderr, once a
    second for runs that last; finish() prints the totals."""

    def __init__(self, total_bytes):
        self.total, self.start, self.last = total_bytes, time.monotonic(), time.monotonic()
        self.documents = self.bytes = 0

    def add(self, documents, nbytes):
        self.documents += documents
        self.bytes += nbytes
        now = time.monotonic()
        if now - self.last < 1.0 or now - self.start < 2.0:
            return
        self.last, elapsed = now, now - self.start
        rate = self.bytes / elapsed
        of = f" of {self.total / 1e6:.1f} MB ({100 * self.bytes / self.total:.0f}%)" if self.total else " MB"
        eta = f", ETA {(self.total - self.bytes) / rate:.0f} s" if self.total > self.bytes and rate > 0 else ""
        print(f"megac data: {self.documents} documents, {self.bytes / 1e6:.1f}{of}, "
              f"{self.documents / elapsed:.0f} documents/s, {rate / 1e6:.1f} MB/s{eta}", file=sys.stderr, flush=True)

    def finish(self):
        elapsed = time.monotonic() - self.start
        share = f" ({100 * self.bytes / self.total:.0f}% of the input)" if self.total else ""
        print(f"megac data: read {self.bytes} bytes{share}, {self.documents} documents in {elapsed:.1f} s "
              f"({self.bytes / elapsed / 1e6 if elapsed > 0 else 0:.1f} MB/s)", file=sys.stderr, flush=True)


def encode_corpus(args):
    spec = dict(tokenizer_type=args.tokenizer_type, vocab_file=args.vocab_file, merge_file=args.merge_file,
                tokenizer_model=args.tokenizer_model)
    tokenizer = load(**spec)
    if args.append_eod and tokenizer.eod is None:
        raise Failure(f"--append-eod: the {args.tokenizer_type} tokenizer has no end-of-document token "
                      f"(tried {', '.join(EOD_CANDIDATES)} and an eos_token in tokenizer_config.json); "
                      f"give --append-eod=false")
    keys = args.json_keys or ["text"]
    out = sys.stdout.buffer
    header = dict(tokenizer_type=args.tokenizer_type, vocab_size=tokenizer.vocab_size, eod=tokenizer.eod,
                  special_tokens=tokenizer.special_tokens, files=tokenizer.files, keys=keys)
    out.write((json.dumps(header) + "\n").encode())
    total = sum(os.path.getsize(p) for p in args.input if os.path.isfile(p))
    progress = Progress(total)
    work = batches(read_documents(args, keys), 64)
    pool = None
    if args.workers > 1:
        pool = multiprocessing.Pool(args.workers, initializer=start_worker, initargs=(spec,))
        encoded = pool.imap(encode_batch, work)
    else:
        start_worker(spec)
        encoded = map(encode_batch, work)
    try:
        for batch in encoded:
            documents = nbytes = 0
            for ids_per_key, document_bytes in batch:
                nbytes += document_bytes
                if ids_per_key is None:
                    continue
                documents += 1
                for k, ids in enumerate(ids_per_key):
                    if args.append_eod:
                        ids.append(tokenizer.eod)
                    out.write(RECORD.pack(k, len(ids)))
                    out.write(array.array("i", ids).tobytes())
            progress.add(documents, nbytes)
    finally:
        if pool:
            pool.terminate()
    out.write(RECORD.pack(END, 0))
    out.flush()
    progress.finish()


def load_from_checkpoint(folder):
    """The tokenizer a checkpoint carries (OUT/train copies it in): megac_tokenizer.json names its
    type and end-of-document id; its files are the checkpoint's copies, in Hugging Face's names."""
    path = os.path.join(folder, "megac_tokenizer.json")
    try:
        with open(path) as f:
            record = json.load(f)
    except (OSError, ValueError) as e:
        raise Failure(f"{path}: cannot read the checkpoint's tokenizer ({e})")
    kind, file = record.get("tokenizer_type"), lambda name: os.path.join(folder, name)
    files = {"ByteTokenizer": {}, "GPT2BPETokenizer": dict(vocab_file=file("vocab.json"), merge_file=file("merges.txt")),
             "BertWordPieceLowerCase": dict(vocab_file=file("vocab.txt")),
             "BertWordPieceCase": dict(vocab_file=file("vocab.txt")),
             "HuggingFaceTokenizer": dict(tokenizer_model=file("tokenizer.json")),
             "SentencePieceTokenizer": dict(tokenizer_model=file("tokenizer.model"))}
    if kind not in files:
        raise Failure(f"{path}: unknown tokenizer_type {kind!r}")
    return load(kind, **files[kind]), record


HF_TOKENIZER_FILES = "tokenizer.json, vocab.json + merges.txt, or tokenizer.model"


def load_from_folder(folder):
    """The tokenizer a model folder carries and the ids that end a generation: a megac checkpoint's
    (megac_tokenizer.json: its end of document), else a Hugging Face folder's files (tokenizer.json,
    vocab.json + merges.txt, tokenizer.model) and the eos_token_id transformers' generate stops at
    (generation_config.json's, else config.json's, else the tokenizer's end of document)."""
    if os.path.isfile(os.path.join(folder, "megac_tokenizer.json")):
        tokenizer, record = load_from_checkpoint(folder)
        return tokenizer, [record["eod"]] if isinstance(record.get("eod"), int) else []
    file = lambda name: os.path.join(folder, name)
    if os.path.isfile(file("tokenizer.json")):
        tokenizer = load("HuggingFaceTokenizer", tokenizer_model=file("tokenizer.json"))
    elif os.path.isfile(file("vocab.json")) and os.path.isfile(file("merges.txt")):
        tokenizer = load("GPT2BPETokenizer", vocab_file=file("vocab.json"), merge_file=file("merges.txt"))
    elif os.path.isfile(file("tokenizer.model")):
        tokenizer = load("SentencePieceTokenizer", tokenizer_model=file("tokenizer.model"))
    else:
        raise Failure(f"{folder} carries no tokenizer (megac_tokenizer.json, {HF_TOKENIZER_FILES}); copy the "
                      f"model's tokenizer files into it, or give token ids to OUT/train generate --prompt-ids")
    for name in ("generation_config.json", "config.json"):
        try:
            with open(file(name)) as f:
                eos = json.load(f).get("eos_token_id")
        except (OSError, ValueError, AttributeError):
            continue
        ids = eos if isinstance(eos, list) else [eos]
        if eos is not None and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids):
            return tokenizer, ids
    return tokenizer, [tokenizer.eod] if tokenizer.eod is not None else []


def main():
    ap = argparse.ArgumentParser(prog="megac_tokenizer.py")
    sub = ap.add_subparsers(dest="command", required=True)
    encode = sub.add_parser("encode", help="a model folder's tokenizer: text -> {ids, eod_ids} as JSON")
    encode.add_argument("--checkpoint", required=True)
    encode.add_argument("--text", required=True)
    decode = sub.add_parser("decode", help="a model folder's tokenizer: comma-separated ids -> text")
    decode.add_argument("--checkpoint", required=True)
    decode.add_argument("--ids", required=True)
    corpus = sub.add_parser("encode-corpus")
    corpus.add_argument("--input", action="append", required=True)
    corpus.add_argument("--input-format", choices=["auto", "text", "jsonl"], default="auto")
    corpus.add_argument("--json-keys", action="append")
    corpus.add_argument("--split-paragraphs", action="store_true")
    corpus.add_argument("--append-eod", action="store_true")
    corpus.add_argument("--workers", type=int, default=1)
    for flag in ("--tokenizer-type", "--vocab-file", "--merge-file", "--tokenizer-model"):
        corpus.add_argument(flag)
    args = ap.parse_args()
    if args.command in ("encode", "decode"):
        try:
            tokenizer, eod_ids = load_from_folder(args.checkpoint)
            if args.command == "encode":
                print(json.dumps({"ids": tokenizer.encode(args.text), "eod_ids": eod_ids}))
            else:
                sys.stdout.write(tokenizer.decode([int(i) for i in args.ids.split(",") if i]))
        except Failure as e:
            sys.exit(f"megac generate: error: {e}")
        return
    fmt = args.input_format
    # As Megatron's preprocess_data.py, --json-keys means JSON lines; so does a .json/.jsonl name.
    args.input_format = lambda path: fmt if fmt != "auto" else (
        "jsonl" if args.json_keys or path.endswith((".json", ".jsonl")) else "text")
    try:
        encode_corpus(args)
    except Failure as e:
        print(f"megac data: error: {e}; nothing was written", file=sys.stderr)
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(1)


if __name__ == "__main__":
    main()
