#include "TokenizerProcess.h"
#include "MegacPaths.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Program.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

using namespace llvm;

namespace {

constexpr uint32_t kEndRecord = 0xFFFFFFFF;
// The script refuses documents over 64 MiB of text; no document has more ids than bytes + EOD.
constexpr uint64_t kMaxIds = (uint64_t(1) << 26) + 1;

Error fail(const Twine &message) { return createStringError(inconvertibleErrorCode(), message); }

struct FileCloser {
  void operator()(FILE *f) const { fclose(f); }
};

/// Reads the records after the header; returns once the closing record is read.
Error readRecords(FILE *in, size_t keys, function_ref<Error(size_t, const std::vector<int32_t> &)> onDocument) {
  std::vector<int32_t> ids;
  while (true) {
    uint32_t key;
    uint64_t count;
    if (fread(&key, sizeof key, 1, in) != 1 || fread(&count, sizeof count, 1, in) != 1)
      return fail("the tokenizer's output ended before its closing record");
    if (key == kEndRecord)
      return Error::success();
    if (key >= keys || count > kMaxIds)
      return fail("the tokenizer's output is malformed (key " + Twine(key) + ", " + Twine(count) + " ids)");
    ids.resize(count);
    if (count && fread(ids.data(), sizeof(int32_t), count, in) != count)
      return fail("the tokenizer's output ended inside a document");
    if (Error e = onDocument(key, ids))
      return e;
  }
}

Expected<megac::TokenizerHeader> parseHeader(StringRef line) {
  Expected<json::Value> value = json::parse(line);
  if (!value)
    return fail("the tokenizer's header is not JSON: " + toString(value.takeError()));
  const json::Object *object = value->getAsObject();
  std::optional<int64_t> vocab = object ? object->getInteger("vocab_size") : std::nullopt;
  const json::Array *keys = object ? object->getArray("keys") : nullptr;
  if (!vocab || *vocab <= 0 || !keys || keys->empty())
    return fail("the tokenizer's header lacks vocab_size or keys");
  megac::TokenizerHeader header{line.str(), *vocab, {}};
  for (const json::Value &key : *keys)
    if (std::optional<StringRef> s = key.getAsString())
      header.keys.push_back(s->str());
  if (header.keys.size() != keys->size())
    return fail("the tokenizer's header has a key that is not a string");
  return header;
}

} // namespace

std::string megac::tokenizerPython() {
  std::string python = "python3";
  if (const char *chosen = std::getenv("MEGAC_PYTHON"); chosen && *chosen)
    python = chosen;
  else if (const std::string &env = megacPaths().pythonEnv; !env.empty() && sys::fs::can_execute(env))
    return env;
  // A full path: not every way of starting a program searches PATH.
  if (StringRef(python).contains('/'))
    return python;
  ErrorOr<std::string> found = sys::findProgramByName(python);
  return found ? *found : python;
}

Error megac::runTokenizer(ArrayRef<std::string> args, function_ref<Error(const TokenizerHeader &)> onHeader,
                          function_ref<Error(size_t, const std::vector<int32_t> &)> onDocument) {
  std::string python = tokenizerPython();
  std::vector<std::string> argv = {python, megacPaths().tokenizerScript, "encode-corpus"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char *> cargv;
  for (std::string &a : argv)
    cargv.push_back(a.data());
  cargv.push_back(nullptr);

  int pipeFds[2];
  if (pipe(pipeFds) != 0)
    return fail(Twine("cannot make a pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipeFds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipeFds[0]);
  posix_spawn_file_actions_addclose(&actions, pipeFds[1]);
  pid_t pid;
  int rc = posix_spawnp(&pid, python.c_str(), &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipeFds[1]);
  if (rc != 0) {
    close(pipeFds[0]);
    return fail("cannot run " + python + " for the tokenizer (" + std::strerror(rc) +
                "); set MEGAC_PYTHON to a python3 with the tokenizers and sentencepiece packages");
  }

  std::unique_ptr<FILE, FileCloser> in(fdopen(pipeFds[0], "rb"));
  bool callbackFailed = false; // ours, not the script's: the script then ends on a broken pipe
  auto checked = [&](Error e) {
    callbackFailed = bool(e);
    return e;
  };
  Error result = [&]() -> Error {
    char *line = nullptr;
    size_t capacity = 0;
    ssize_t n = getline(&line, &capacity, in.get());
    std::string headerLine = n > 0 ? std::string(line, n) : "";
    std::free(line);
    if (n <= 0)
      return fail("the tokenizer wrote nothing");
    Expected<TokenizerHeader> header = parseHeader(StringRef(headerLine).rtrim('\n'));
    if (!header)
      return header.takeError();
    if (Error e = checked(onHeader(*header)))
      return e;
    return readRecords(in.get(), header->keys.size(),
                       [&](size_t key, const std::vector<int32_t> &ids) { return checked(onDocument(key, ids)); });
  }();
  in.reset(); // a script still writing gets a broken pipe and ends
  int status = 0;
  waitpid(pid, &status, 0);
  if (callbackFailed || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
    return result;
  consumeError(std::move(result));
  return fail("the tokenizer (" + python + " " + megacPaths().tokenizerScript + ") failed; its error is above");
}
