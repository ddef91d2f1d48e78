# What scripts/gpu_prepare.sh (here) and scripts/gpu_check.sh (on the GPU machine) must compute
# alike: the hashes in gpu/PREPARED that tell whether gpu/ still matches the carried tree.
# Sourced from the repository root.

# Content hash of the files under the given paths.
tree_sha1() {
  find "$@" -type f ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z |
    xargs -0 sha1sum | sha1sum | cut -d' ' -f1
}

# The generated sources: gpu/CMakeLists.txt, gpu/programs.txt and each listed program's main.cu
# or main.cpp, one per line.
generated_files() {
  local name f
  echo gpu/CMakeLists.txt
  echo gpu/programs.txt
  for name in $(awk '!/^#/ {print $1}' gpu/programs.txt); do
    for f in "gpu/$name/main.cu" "gpu/$name/main.cpp"; do [ -f "$f" ] && echo "$f"; done
  done
}
