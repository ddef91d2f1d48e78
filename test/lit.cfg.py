# lit configuration for megac: FileCheck tests of the dialects, passes, frontend and emitters.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "megac"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".yaml", ".test"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt", "Inputs", "reference", "specs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.megac_obj_root, "test")

config.substitutions.append(("%megac_src_root", config.megac_src_root))
config.substitutions.append(("%megac_obj_root", config.megac_obj_root))

llvm_config.with_system_environment(["HOME", "TMPDIR"])
# not, split-file and FileCheck come from LLVM 22's tool folder.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.use_default_substitutions()
llvm_config.add_tool_substitutions(
    ["megac-opt", "megac", "megac-gradcheck", "megac-schedule-check"], [config.megac_tools_dir, config.llvm_tools_dir])
