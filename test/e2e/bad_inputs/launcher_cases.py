"""How the program was started: launchers and world sizes."""
from bad_inputs.case import Case

AREA = "launcher"
FLAGS = ["--data-path", "{data}", "--lr", "1e-3", "--train-iters", "2", "--save", "{scratch}/ck",
         "--metrics-file", "{scratch}/m.jsonl"]
ABSENT = ["{scratch}/ck", "{scratch}/m.jsonl"]


def cases():
    return [
        Case(AREA, "torchrun with 2 processes", ["{train}"] + FLAGS, r"started by torchrun as 2 processes",
             absent=ABSENT, env={"WORLD_SIZE": "2", "RANK": "0"}),
        Case(AREA, "srun with 2 tasks and no PMI", ["{train}"] + FLAGS, r"started by srun as 2 processes",
             absent=ABSENT, env={"SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "0"}),
        Case(AREA, "dp 2 program without mpirun", ["{train_dp2}"] + FLAGS,
             r"started without mpirun; run mpirun -np 2 .*/train \.\.\.; or compile for 1 rank: \S*megac compile "
             r"\S*gpt2-tiny\.yaml .*-o \S*gpt2-dp2 --dp 1$", absent=ABSENT),
    ]
