"""What the end-to-end scripts share: running a command or failing loudly, reading a metrics
file, and the corpus every Debian machine has."""
import glob
import json
import os
import subprocess
import sys


# mpirun as root (CI's containers), more ranks than cores, one OpenMP thread per rank.
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1", "OMP_NUM_THREADS": "1"}


def run(cmd, env=None):
    """Runs cmd; exits with its output if it fails."""
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})})
    if result.returncode != 0:
        sys.exit(f"command failed ({result.returncode}): {' '.join(cmd)}\n{result.stdout[-3000:]}")
    return result.stdout


def metrics(path):
    """The per-iteration objects of an OUT/train --metrics-file."""
    with open(path) as f:
        return [json.loads(line) for line in f]


def make_license_corpus(megac, prefix):
    """/usr/share/common-licenses (read at run time, nothing downloaded) as a byte-level dataset."""
    cmd = [megac, "data", "--split-paragraphs", "--output-prefix", prefix]
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.isfile(path) and not os.path.islink(path):
            cmd += ["--input", path]
    run(cmd)
