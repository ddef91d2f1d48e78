"""megac data: its inputs."""
from bad_inputs.case import Case

AREA = "megac data"
OUTPUTS = ["{scratch}/d.bin", "{scratch}/d.idx"]


def data_case(name, args, expect):
    return Case(AREA, name, ["{megac}", "data"] + args, expect, absent=OUTPUTS, files={"text.txt": "hello\n\nworld\n"})


def cases():
    return [
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
        data_case("output folder missing", ["--input", "{scratch}/text.txt", "--output-prefix", "{scratch}/no/d"],
                  r"no/d\.bin: cannot create temporary file"),
    ]
