"""megac compile: plan flags and the command line."""
from bad_inputs.case import Case

AREA = "plan flags"
OUT = "{scratch}/out"


def compile_case(name, flags, expect, area=AREA):
    return Case(area, name, ["{megac}", "compile", "{spec}", "-o", OUT, "--no-build"] + flags, expect,
                absent=[OUT])


def cases():
    return [
        compile_case("micro batch 2^60", ["--micro-batch-size", "1152921504606846976"], r"--micro-batch-size"),
        compile_case("dp 10^8", ["--dp", "100000000"], r"--data-parallel-size|--dp"),
        compile_case("global batch 10^9 with pp", ["--pp", "2", "--global-batch-size", "1000000000"],
                     r"--global-batch-size"),
        compile_case("tp 0", ["--tp", "0"], r"--tensor-model-parallel-size|--tp"),
        compile_case("conflicting tp aliases", ["--tp", "2", "--tensor-model-parallel-size", "4"],
                     r"--tp.*--tensor-model-parallel-size|--tensor-model-parallel-size.*--tp"),
        compile_case("spec key as a flag", ["--hidden-size", "128"], r"--hidden-size"),
        Case(AREA, "stray positional argument", ["{megac}", "compile", "{spec}", "extra.yaml", "-o", OUT],
             r"extra\.yaml", absent=[OUT]),
    ]
