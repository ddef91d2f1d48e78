"""megac data: its inputs."""
from bad_inputs.case import Case

AREA = "megac data"
OUTPUTS = ["{scratch}/d.bin", "{scratch}/d.idx"]


JSON_OUTPUTS = ["{scratch}/d_text_document.bin", "{scratch}/d_text_document.idx", "{scratch}/d_text_document.tokenizer.json"]
FILES = {"text.txt": "hello\n\nworld\n", "a.jsonl": '{"text": "hello"}\n{"text": "world"}\n',
         "no-mask-vocab.txt": "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\nworld\n",
         "bad.jsonl": '{"text": "hello"}\n{"text": 3}\n', "notjson.jsonl": '{"text": "hello"}\nhello\n'}


def data_case(name, args, expect):
    return Case(AREA, name, ["{megac}", "data"] + args, expect, absent=OUTPUTS + JSON_OUTPUTS, files=FILES)


def cases():
    return [
        data_case("output prefix is a folder", ["--input", "{scratch}/text.txt", "--output-prefix", "{scratch}/o/"],
                  r"--output-prefix .*o/ names a folder, not files; give the files' name too, e\.g\. "
                  r"--output-prefix .*o/corpus"),
        Case(AREA, "failed run into a new folder", ["{megac}", "data", "--input", "{scratch}/missing.txt",
                                                     "--output-prefix", "{scratch}/new/sub/d"],
             r"missing\.txt", absent=["{scratch}/new"], files=FILES),
        data_case("output folder under a file", ["--input", "{scratch}/text.txt", "--output-prefix",
                                                 "{scratch}/text.txt/sub/d"],
                  r"--output-prefix .*text\.txt/sub/d: cannot create the folder .*text\.txt/sub: Not a directory"),
        Case(AREA, "input /dev/zero", ["{megac}", "data", "--input", "/dev/zero", "--output-prefix", "{scratch}/d"],
             r"/dev/zero", absent=["{scratch}/d.bin", "{scratch}/d.idx"]),
        # One endless line: the paragraph it would be grows past the document limit just the same.
        data_case("input /dev/zero by paragraphs", ["--input", "/dev/zero", "--split-paragraphs",
                                                    "--output-prefix", "{scratch}/d"],
                  r"--input /dev/zero: a document is longer than 67108864 bytes"),
        # A good input first: the dataset it began is not left behind.
        data_case("good input then /dev/zero", ["--input", "{scratch}/text.txt", "--input", "/dev/zero",
                                                "--output-prefix", "{scratch}/d"],
                  r"--input /dev/zero: a document is longer .*nothing was written"),
        data_case("missing input", ["--input", "{scratch}/text.txt", "--input", "{scratch}/nothing.txt",
                                    "--output-prefix", "{scratch}/d"],
                  r"--input .*nothing\.txt: cannot read it"),
        data_case("input is a folder", ["--input", "{scratch}", "--output-prefix", "{scratch}/d"],
                  r"--input .*: cannot read it"),
        data_case("conflicting output prefixes", ["--input", "{scratch}/text.txt", "--output-prefix", "{scratch}/d",
                                                  "--output-prefix", "{scratch}/e"],
                  r"--output-prefix is given 2 times with different values"),
        data_case("unknown flag", ["--input", "{scratch}/text.txt", "--output-prefix", "{scratch}/d", "--hidden"],
                  r"unknown flag --hidden"),
        data_case("unknown tokenizer type", ["--input", "{scratch}/text.txt", "--output-prefix", "{scratch}/d",
                                             "--tokenizer-type", "GPT2Tokenizer"],
                  r"--tokenizer-type GPT2Tokenizer: unknown; use ByteTokenizer, GPT2BPETokenizer"),
        data_case("workers 0", ["--input", "{scratch}/text.txt", "--output-prefix", "{scratch}/d", "--workers", "0"],
                  r"--workers 0: must be 1 to 256"),
        data_case("GPT-2 BPE without its vocab file", ["--input", "{scratch}/text.txt", "--output-prefix", "{scratch}/d",
                                                       "--tokenizer-type", "GPT2BPETokenizer"],
                  r"--tokenizer-type GPT2BPETokenizer needs --vocab-file FILE.*nothing was written"),
        data_case("a WordPiece vocabulary without [MASK]", ["--input", "{scratch}/text.txt", "--output-prefix",
                                                            "{scratch}/d", "--tokenizer-type", "BertWordPieceLowerCase",
                                                            "--vocab-file", "{scratch}/no-mask-vocab.txt"],
                  r"--vocab-file .*no-mask-vocab\.txt: a BERT vocabulary has \[MASK\]; this one does not"),
        data_case("merges for WordPiece", ["--input", "{scratch}/text.txt", "--output-prefix", "{scratch}/d",
                                          "--tokenizer-type", "BertWordPieceCase", "--vocab-file", "{scratch}/text.txt",
                                          "--merge-file", "{scratch}/text.txt"],
                  r"--merge-file is GPT2BPETokenizer's; --tokenizer-type is BertWordPieceCase"),
        data_case("missing tokenizer model", ["--input", "{scratch}/text.txt", "--output-prefix", "{scratch}/d",
                                              "--tokenizer-type", "SentencePieceTokenizer",
                                              "--tokenizer-model", "{scratch}/nothing.model"],
                  r"--tokenizer-model .*nothing\.model: no such file"),
        data_case("tokenizer model for GPT-2 BPE", ["--input", "{scratch}/text.txt", "--output-prefix", "{scratch}/d",
                                                    "--tokenizer-type", "GPT2BPETokenizer", "--tokenizer-model", "x"],
                  r"--tokenizer-model is HuggingFaceTokenizer's and SentencePieceTokenizer's"),
        data_case("JSON line without the key", ["--input", "{scratch}/a.jsonl", "--output-prefix", "{scratch}/d",
                                                "--json-keys", "body"],
                  r"a\.jsonl: line 1 has no key \"body\".*found: text"),
        data_case("JSON key not a string", ["--input", "{scratch}/bad.jsonl", "--output-prefix", "{scratch}/d"],
                  r"bad\.jsonl: line 2 has a int for key \"text\""),
        data_case("a line that is not JSON", ["--input", "{scratch}/notjson.jsonl", "--output-prefix", "{scratch}/d"],
                  r"notjson\.jsonl: line 2 is not JSON"),
        data_case("JSON lines and text mixed", ["--input", "{scratch}/a.jsonl", "--input", "{scratch}/text.txt",
                                                "--output-prefix", "{scratch}/d"],
                  r"one is JSON lines \(\.json/\.jsonl\) and one text"),
        data_case("paragraphs of JSON lines", ["--input", "{scratch}/a.jsonl", "--output-prefix", "{scratch}/d",
                                               "--split-paragraphs"],
                  r"--split-paragraphs is for text inputs"),
    ]
