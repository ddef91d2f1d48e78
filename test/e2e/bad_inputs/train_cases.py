"""OUT/train: its flags, and where it writes."""
from bad_inputs import files
from bad_inputs.case import Case

AREA = "train flags"
SAVE, METRICS = "{scratch}/ck", "{scratch}/m.jsonl"


def train_case(name, flags, expect, area=AREA, program="{train}", env=None, files=None):
    base = ["--data-path", "{data}", "--lr", "1e-3", "--train-iters", "2"]
    out = [] if "--save" in flags else ["--save", SAVE]
    return Case(area, name, [program] + base + out + ["--metrics-file", METRICS] + flags, expect,
                absent=[SAVE, METRICS], env=env or {}, files=files or {})


def generate_case(name, flags, expect, program="{train}"):
    return Case("train flags", name, [program, "generate", "--load", "{ckpt}", *flags], expect)


def cases():
    return [
        train_case("metrics file is the save folder", ["--save", "{scratch}/ck", "--metrics-file", "{scratch}/ck"],
                   r"--metrics-file and --save both name .*ck: the metrics are one file, the checkpoints a folder"),
        train_case("metrics file is a folder", ["--metrics-file", "{scratch}/mdir"],
                   r"--metrics-file .*mdir is a folder; give a file", files={"mdir": files.Folder()}),
        generate_case("generate at temperature nan", ["--prompt-ids", "1", "--temperature", "nan"],
                      r"--temperature: must be a finite number in \[0, 1e6\]"),
        Case("train flags", "megac generate at temperature nan",
             ["{megac}", "generate", "{ckpt}", "--prompt", "This", "--temperature", "nan"],
             r"megac generate: error: --temperature is nan; it must be a finite number"),
        Case("train flags", "megac generate with top p nan",
             ["{megac}", "generate", "{ckpt}", "--prompt", "This", "--top-p", "nan"],
             r"megac generate: error: --top-p is nan; it must be > 0 and <= 1"),
        generate_case("generate from a dp 2 program", ["--prompt-ids", "1,2"], r"this program has no logits_step: "
                      r"generation needs one rank in fp32", program="{train_dp2}"),
        generate_case("generate past seq_length", ["--prompt-ids", "1,2", "--max-new-tokens", "100"],
                      r"--prompt-ids \(2 tokens\) \+ --max-new-tokens \(100\) exceed the model's seq_length 32"),
        generate_case("generate from an id outside the vocabulary", ["--prompt-ids", "1,300"],
                      r"--prompt-ids: 300 is not a token id of this model \(0 to 256\)"),
        generate_case("generate without a prompt", [], r"--prompt-ids is required"),
        train_case("a masked LM on data without [MASK]", [], r"a masked language model \(BERT\) masks tokens with the "
                   r"tokenizer's \[MASK\], but the data .*corpus was made by ByteTokenizer, which has none .*; make "
                   r"it with megac data --tokenizer-type BertWordPieceLowerCase", program="{train_bert}"),
        generate_case("generate from a masked LM", ["--prompt-ids", "1,2"], r"this program is a masked language "
                      r"model \(BERT\): it predicts masked tokens from both sides and does not continue a text",
                      program="{train_bert}"),
        Case("train flags", "megac generate without a prompt", ["{megac}", "generate", "{ckpt}"],
             r"megac generate: error: --prompt TEXT is required"),
        Case("train flags", "megac generate of a folder that is no checkpoint",
             ["{megac}", "generate", "{scratch}", "--prompt", "x"], r"holds no model megac generate reads: neither a "
             r"megac checkpoint"),
        Case("train flags", "megac generate past seq_length",
             ["{megac}", "generate", "{ckpt}", "--prompt", "This", "--max-new-tokens", "100"],
             r"the prompt \(4 tokens\) \+ --max-new-tokens \(100\) exceed the model's seq_length 32; give "
             r"--max-new-tokens 28 or fewer", absent=["{scratch}/megac-cache/programs"]),
        generate_case("generate top p 0", ["--prompt-ids", "1", "--top-p", "0"], r"--top-p: must be > 0 and <= 1"),
        train_case("eval interval 0", ["--eval-interval", "0"], r"--eval-interval is 0; it must be at least 1"),
        train_case("eval iters negative", ["--eval-iters", "-1"], r"--eval-iters"),
        train_case("skip train without evaluation data", ["--skip-train", "--split", "100,0,0"],
                   r"--skip-train evaluates, but there is no validation or test data: give --split"),
        train_case("skip train with eval iters 0", ["--skip-train", "--eval-iters", "0", "--split", "9,1"],
                   r"--skip-train evaluates, but --eval-iters is 0"),
        # Evaluations past the validation data read it again (its epochs), but count in 64 bits.
        train_case("validation batches past 2^63 samples", ["--split", "99,1", "--eval-iters", "4611686018427387904"],
                   r"the validation data: --eval-iters \(4611686018427387904\) x --global-batch-size \(2\) needs "
                   r"more than 2\^63 samples.*use --eval-iters 4611686018427387903 or fewer"),
        Case(AREA, "validation data without one sample",
             ["{train}", "--train-data-path", "{data}", "--valid-data-path", "{scratch}/tiny", "--lr", "1e-3",
              "--train-iters", "2", "--save", SAVE, "--metrics-file", METRICS],
             r"the validation data: .*tiny: documents 0\.\.1 hold 10 tokens, fewer than one sample of 32\+1 tokens",
             absent=[SAVE, METRICS],
             files={"tiny.idx": files.dataset_idx([10]), "tiny.bin": files.dataset_bin(list(range(10)))}),
        train_case("global batch 2^62", ["--global-batch-size", "4611686018427387904"],
                   r"--global-batch-size \(4611686018427387904\) needs more than 2\^63 bytes for one iteration's "
                   r"samples of 32\+1 tokens; use a smaller --global-batch-size"),
        train_case("train iters 2^62", ["--train-iters", "4611686018427387904"],
                   r"--train-iters \(4611686018427387904\) x --global-batch-size \(2\).*use --train-iters [0-9]+ or fewer"),
        train_case("train iters past int64", ["--train-iters", "9223372036854775808"],
                   r"--train-iters: value 9223372036854775808 is out of range"),
        train_case("lr nan", ["--lr", "nan"], r"--lr: value nan is not a finite number"),
        train_case("lr 1e999", ["--lr", "1e999"], r"--lr: value 1e999 is not a finite number"),
        train_case("lr 0", ["--lr", "0"], r"--lr is 0; it must be > 0"),
        train_case("min lr above lr", ["--min-lr", "1"], r"--min-lr is 1; it must be between 0 and --lr"),
        train_case("tensorboard dir is a file", ["--tensorboard-dir", "{data}.bin"],
                   r"--tensorboard-dir .*\.bin: cannot create it"),
        train_case("tensorboard interval 0", ["--tensorboard-dir", "{scratch}/tb", "--tensorboard-log-interval", "0"],
                   r"--tensorboard-log-interval: Value 0 not in range"),
        train_case("WSD without its anneal", ["--lr-decay-style", "WSD"],
                   r"--lr-decay-style WSD needs --lr-wsd-decay-iters between 1 and --lr-decay-iters"),
        train_case("WSD anneal past the decay", ["--lr-decay-style", "WSD", "--lr-wsd-decay-iters", "50",
                                                 "--lr-decay-iters", "10"],
                   r"--lr-wsd-decay-iters between 1 and --lr-decay-iters \(10\), got 50"),
        train_case("WSD anneal without WSD", ["--lr-wsd-decay-iters", "5"],
                   r"--lr-wsd-decay-iters is for --lr-decay-style WSD \(this run has linear\)"),
        train_case("warmup fraction and iters", ["--lr-warmup-fraction", "0.1", "--lr-warmup-iters", "2"],
                   r"--lr-warmup-fraction and --lr-warmup-iters are both given; give one"),
        train_case("warmup fraction 1", ["--lr-warmup-fraction", "1"],
                   r"--lr-warmup-fraction is 1; it must be in \[0, 1\)"),
        train_case("warmup fraction negative", ["--lr-warmup-fraction", "-0.5"],
                   r"--lr-warmup-fraction is -0.5; it must be in \[0, 1\)"),
        train_case("warmup init above lr", ["--lr-warmup-init", "5"],
                   r"--lr-warmup-init is 5; it must be between 0 and --lr"),
        train_case("unknown WSD anneal", ["--lr-decay-style", "WSD", "--lr-wsd-decay-style", "step",
                                          "--lr-wsd-decay-iters", "2"],
                   r"--lr-wsd-decay-style: step not in \{linear,cosine,exponential\}"),
        train_case("warmup past decay", ["--lr-warmup-iters", "5", "--lr-decay-iters", "3"],
                   r"--lr-warmup-iters \(5\) is greater than --lr-decay-iters \(3\)"),
        train_case("adam beta1 1", ["--adam-beta1", "1"], r"--adam-beta1 is 1; it must be in \[0, 1\)"),
        train_case("adam eps 0", ["--adam-eps", "0"], r"--adam-eps is 0; it must be > 0"),
        train_case("clip grad negative", ["--clip-grad", "-1"], r"--clip-grad is -1"),
        train_case("weight decay inf", ["--weight-decay", "inf"], r"--weight-decay: value inf is not a finite"),
        train_case("seed in hex", ["--seed", "0x10"], r"--seed: value 0x10 is not a whole number"),
        train_case("log interval 0", ["--log-interval", "0"], r"--log-interval is 0; it must be at least 1"),
        train_case("train: stray positional argument", ["extra"], r"not expected: extra"),
        train_case("train: unknown flag", ["--hidden-size", "128"], r"--hidden-size.*\n.*Run with --help to list the flags"),
        train_case("micro batch not the compiled one", ["--micro-batch-size", "8"],
                   r"--micro-batch-size 8 does not match the compiled program \(2\)"),
        train_case("global batch not a multiple", ["--global-batch-size", "5"],
                   r"--global-batch-size \(5\) is not a multiple of the micro batch size \(2\)"),
        train_case("bf16 and fp16", ["--bf16", "--fp16"], r"--bf16 and --fp16 are both given"),
        train_case("loss scale without fp16", ["--loss-scale", "1024"], r"--loss-scale 1024 needs --fp16"),
        train_case("bf16 on an fp32 program", ["--bf16"],
                   r"--bf16: this program was compiled for fp32; recompile with `megac compile SPEC --bf16 \.\.\.` or drop --bf16"),
        train_case("grad reduce in bf16 without bf16", ["--grad-reduce-in-bf16"], r"--grad-reduce-in-bf16 needs --bf16"),
        train_case("save interval without save", ["--save-interval", "2", "--save", ""],
                   r"--save-interval 2 needs --save DIR"),
        train_case("keep latest without save", ["--keep-latest-k", "2", "--save", ""], r"--keep-latest-k 2 needs --save"),
        train_case("ckpt step without load", ["--ckpt-step", "2"], r"--ckpt-step says how to load a checkpoint, but no --load"),
        train_case("finetune without load", ["--finetune"], r"--finetune says how to load a checkpoint, but no --load"),
        train_case("timeout 0", ["--distributed-timeout-minutes", "0"], r"--distributed-timeout-minutes is 0"),
        train_case("exit duration nan", ["--exit-duration-in-mins", "nan"], r"--exit-duration-in-mins: value nan"),
        train_case("save is a file", ["--save", "{scratch}/file"], r"--save .*file exists and is not a folder",
                   files={"file": "x"}),
        train_case("save below a file", ["--save", "{scratch}/file/ck"], r"--save .*is not a folder",
                   files={"file": "x"}),
        train_case("save where nothing can be written", ["--save", "/proc/megac-ckpt"], r"--save /proc/megac-ckpt"),
        train_case("metrics file in a missing folder", ["--metrics-file", "{scratch}/no/such/m.jsonl"],
                   r"no/such/m\.jsonl"),
    ]
