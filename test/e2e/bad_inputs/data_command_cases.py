"""megac data: its inputs."""
from bad_inputs.case import Case

AREA = "megac data"


def cases():
    return [
        Case(AREA, "input /dev/zero", ["{megac}", "data", "--input", "/dev/zero", "--output-prefix", "{scratch}/d"],
             r"/dev/zero", absent=["{scratch}/d.bin", "{scratch}/d.idx"]),
    ]
