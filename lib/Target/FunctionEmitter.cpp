#include "FunctionEmitter.h"

#include "megac/Analysis/BufferAliases.h"
#include "megac/Plan/PlanIR.h"
#include "tx/TxLocations.h"
#include "tx/TxNames.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"

#include <cstdio>

using namespace mlir;

namespace megac::emit {

int64_t numel(Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); }
std::string cppElementType(Type t) {
  Type e = cast<RankedTensorType>(t).getElementType();
  return e.isF32()                ? "float"
         : e.isBF16()             ? "megart::bf16_t"
         : e.isF16()              ? "megart::fp16_t"
         : e.isSignlessInteger(32) ? "int32_t" // a router's choices and rows (tx.moe_route, tx.moe_assign)
                                  : "";
}
static ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }
static int64_t prod(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

std::string typeString(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  // The common case written directly, as MLIR prints it: Type::print sets up a printer each call,
  // which was a good part of emitting a large pipeline (megac plan emits one per candidate).
  if (auto tensor = dyn_cast<RankedTensorType>(t); tensor && !tensor.getEncoding() && tensor.hasStaticShape()) {
    Type e = tensor.getElementType();
    if (const char *element = e.isF32() ? "f32" : e.isBF16() ? "bf16" : e.isF16() ? "f16" : nullptr) {
      os << "tensor<";
      for (int64_t d : tensor.getShape())
        os << d << "x";
      os << element << ">";
      return s;
    }
  }
  t.print(os);
  return s;
}

std::string floatLiteral(double v) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%.9g", v);
  if (s.find_first_of(".eni") == std::string::npos)
    s += ".0";
  return s + "f";
}

std::string cString(StringRef s) {
  std::string out = "\"";
  for (char c : s) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n')
      out += "\\n";
    else if (c == '"' || c == '\\')
      out += std::string("\\") + c;
    else if (byte < 0x20 || byte == 0x7f) { // e.g. a spec's CR: raw, it would end the literal's line
      char octal[5];
      std::snprintf(octal, sizeof octal, "\\%03o", byte);
      out += octal;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// ---- names --------------------------------------------------------------------------------------

namespace {

/// The names a generated function's own signature and the runtime take (a local variable would
/// hide them); the kernels' are in dialects/tx/RuntimeKernels.def.
// clang-format off
constexpr const char *kProgramNames[] = {
    "ctx", "ws", "params", "grads", "ids", "labels", "dloss", "stash", "input", "output", "input_grad",
    "output_grad", "megart", "std", "p", "main", "int32_t", "int64_t", "size_t"};
// clang-format on

/// C++20's keywords and alternative tokens (C++17's and the ones C++20 added).
constexpr const char *kKeywords[] = {
    "alignas",     "alignof",   "and",        "and_eq",    "asm",      "auto",         "bitand",
    "bitor",       "bool",      "break",      "case",      "catch",    "char",         "char8_t",
    "char16_t",    "char32_t",  "class",      "compl",     "concept",  "const",        "consteval",
    "constexpr",   "constinit", "const_cast", "continue",  "co_await", "co_return",    "co_yield",
    "decltype",    "default",   "delete",     "do",        "double",   "dynamic_cast", "else",
    "enum",        "explicit",  "export",     "extern",    "false",    "float",        "for",
    "friend",      "goto",      "if",         "inline",    "int",      "long",         "mutable",
    "namespace",   "new",       "noexcept",   "not",       "not_eq",   "nullptr",      "operator",
    "or",          "or_eq",     "private",    "protected", "public",   "register",     "reinterpret_cast",
    "requires",    "return",    "short",      "signed",    "sizeof",   "static",       "static_assert",
    "static_cast", "struct",    "switch",     "template",  "this",     "thread_local", "throw",
    "true",        "try",       "typedef",    "typeid",    "typename", "union",        "unsigned",
    "using",       "virtual",   "void",       "volatile",  "wchar_t",  "while",        "xor",
    "xor_eq"};

} // namespace

CppNames::CppNames() {
  for (const char *name : kProgramNames)
    used.insert(name);
  for (StringRef name : tx::unqualifiedKernelNames())
    used.insert(name);
  for (const char *keyword : kKeywords)
    used.insert(keyword);
}

std::string CppNames::take(StringRef irName, StringRef fallback) {
  std::string base;
  for (char c : irName)
    base += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  if (base.empty() || std::isdigit(static_cast<unsigned char>(base[0])))
    base = fallback.str() + std::to_string(unnamed++);
  std::string name = base;
  for (unsigned n = 1; !used.insert(name).second; ++n)
    name = base + "_" + std::to_string(n);
  return name;
}

std::string CppNames::take(Value v, StringRef fallback) {
  auto result = dyn_cast<OpResult>(v);
  return take(result ? tx::resultName(result) : tx::valueName(v).str(), fallback);
}

namespace {

using tx::Kernel;
using tx::kernelName;

/// A kernel argument that is a number or a flag, labelled with the kernel parameter's name.
std::string labelled(StringRef label, const std::string &value) { return "/*" + label.str() + "=*/" + value; }

/// Emits one MLIR function as one C++ function.
class FunctionEmitter {
public:
  FunctionEmitter(func::FuncOp fn, Signature &sig, const tx::ParamTable &params, llvm::raw_ostream &os)
      : fn(fn), sig(sig), params(params), os(os) {}

  /// Returns the workspace bytes the function needs, its callees' included.
  FailureOr<int64_t> emit(llvm::raw_ostream &plan);

private:
  LogicalResult assignStorage(llvm::raw_ostream &plan);
  LogicalResult emitOp(Operation &op);
  std::string ptr(Value v) { return names.lookup(v); }
  /// The communicator of one grid axis: ctx.tp, ctx.dp, ctx.pp (@grid) or, with hybrid
  /// sharding, ctx.dp_shard / ctx.dp_replicate (@dp_grid).
  FailureOr<std::string> communicator(Operation &op, StringRef grid, ArrayRef<int16_t> axes) {
    std::string name = communicatorName(grid, axes);
    if (name.empty())
      return unsupported(op, "a collective over more than one grid axis, or none, or another grid than @grid "
                             "and @dp_grid");
    return name;
  }
  /// The Megatron rule a pass recorded on a collective: a comment above its call.
  void ruleComment(Operation *op) {
    if (auto rule = op->getAttrOfType<StringAttr>(names::kRuleAttr))
      os << "  // " << rule.getValue() << "\n";
  }
  bool onDevice() const { return sig.target == Target::Cuda; }
  /// Buffer copies and zeroing: the C library on the host, stream-ordered calls on the GPU.
  void copy(const std::string &dst, const std::string &src, int64_t bytes) {
    os << "  " << (onDevice() ? kernelName(Kernel::copy_buffer) : "std::memcpy") << "(" << dst << ", " << src << ", "
       << labelled("bytes", std::to_string(bytes)) << ");\n";
  }
  LogicalResult unsupported(Operation &op, StringRef why) {
    return op.emitOpError() << "cannot be emitted as C++: " << why;
  }
  /// An op's kernel call (KernelCallOpInterface), as one C++ statement.
  LogicalResult emitCall(Operation &op, const tx::KernelCall &call);
  /// The C++ of a kernel's callee: plain kernels by name (the target's namespace is open), the
  /// runtime's helpers qualified, buffer copies and zeroing from the C library on the host.
  std::string callee(tx::Kernel kernel) const;
  std::string argument(const tx::KernelArg &a);
  std::string nestedCall(const tx::KernelCall &call);
  func::FuncOp fn;
  Signature &sig;
  const tx::ParamTable &params;
  llvm::raw_ostream &os;
  DenseMap<Value, std::string> names; // the C++ expression of each value's buffer
  DenseMap<Value, std::string> arenaDecl;
  int64_t frameBytes = 0;       // where a callee's workspace starts
  IntegerAttr workspaceBytes;   // with the deepest callee's
  // Collectives started (those with a tx.wait_collective) and not yet waited for: the result's
  // buffer -> the C++ communicator and the request's name.
  llvm::MapVector<Value, std::pair<std::string, std::string>> pending;
};

/// Whether the function `call` calls draws dropout masks (some op's kernel call does).
bool drawsDropout(func::CallOp call) {
  auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
  if (!callee)
    return false;
  WalkResult r = callee.walk([](Operation *op) {
    std::optional<tx::KernelCall> kernelCall = tx::quietKernelCall(op);
    return kernelCall && tx::drawsDropoutMasks(*kernelCall) ? WalkResult::interrupt() : WalkResult::advance();
  });
  return r.wasInterrupted();
}

LogicalResult FunctionEmitter::assignStorage(llvm::raw_ostream &plan) {
  Block &body = fn.getBody().front();
  auto frame = fn->getAttrOfType<IntegerAttr>(names::kFrameBytesAttr);
  workspaceBytes = fn->getAttrOfType<IntegerAttr>(names::kWorkspaceBytesAttr);
  if (!frame || !workspaceBytes)
    return fn.emitOpError("has no workspace plan (megac-plan-workspace)");
  frameBytes = frame.getInt();
  if (sig.args.size() != body.getNumArguments() || sig.results.size() != fn.getNumResults())
    return fn.emitOpError("internal: the C++ signature does not match the function type");
  for (BlockArgument arg : body.getArguments())
    names[arg] = sig.args[arg.getArgNumber()];
  // Results written straight into the caller's buffers.
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  DenseMap<Value, std::string> resultBuffer;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    Value root = aliasRoot(v);
    if (!sig.results[i].empty() && !isa<BlockArgument>(root) && !resultBuffer.count(root) &&
        !root.getDefiningOp<tx::ParamOp>())
      resultBuffer[root] = sig.results[i];
  }
  // The workspace's buffers, named and declared where megac-plan-workspace placed them.
  std::string lines;
  llvm::raw_string_ostream planLines(lines);
  int64_t position = 0, count = 0;
  for (Operation &op : body) {
    auto offsets = op.getAttrOfType<DenseI64ArrayAttr>(names::kWorkspaceOffsetsAttr);
    auto until = op.getAttrOfType<DenseI64ArrayAttr>(names::kLiveUntilAttr);
    for (auto [i, r] : llvm::enumerate(op.getResults())) {
      if (isView(op))
        continue;
      if (auto it = resultBuffer.find(r); it != resultBuffer.end()) {
        names[r] = it->second;
        continue;
      }
      if (!offsets || !until || offsets.size() != op.getNumResults() || offsets[i] < 0)
        return op.emitOpError() << "result " << i << " has no buffer in the workspace plan (megac-plan-workspace)";
      if (cppElementType(r.getType()).empty())
        return op.emitOpError() << "produces " << r.getType()
                                << "; the C++ emitter handles f32, bf16, f16 and i32 tensors only";
      std::string name = sig.names.take(r);
      names[r] = name;
      const std::string element = cppElementType(r.getType());
      arenaDecl[r] = "  " + element + " *" + name + " = reinterpret_cast<" + element + " *>(ws + " +
                     std::to_string(offsets[i]) + "); // " + typeString(r.getType());
      planLines << llvm::format("  %-24s offset %10lld  bytes %10lld  ops %4lld..%-4lld  ", name.c_str(),
                                (long long)offsets[i], (long long)bytesOf(r), (long long)position,
                                (long long)until[i])
                << typeString(r.getType()) << "\n";
      ++count;
    }
    ++position;
  }
  plan << "@" << fn.getName() << ": " << count << " buffers in " << frameBytes << " bytes\n" << lines;
  return success();
}

FailureOr<int64_t> FunctionEmitter::emit(llvm::raw_ostream &plan) {
  if (!fn.getBody().hasOneBlock())
    return fn.emitOpError("must have one block to be emitted");
  if (failed(assignStorage(plan)))
    return failure();
  Block &body = fn.getBody().front();

  os << sig.prototype << "\n" << sig.prologue;
  for (Operation &op : body)
    if (failed(emitOp(op)))
      return failure();
  os << "}\n\n";
  return workspaceBytes.getInt();
}

std::string FunctionEmitter::callee(Kernel kernel) const {
  if (kernelTraits(kernel) & tx::RuntimeFunction)
    return "megart::" + kernelName(kernel).str();
  if (!onDevice() && kernel == Kernel::copy_buffer)
    return "std::memcpy";
  if (!onDevice() && kernel == Kernel::zero_buffer)
    return "std::memset";
  return kernelName(kernel).str();
}

static std::string integerExpr(const tx::KernelInt &n) {
  const std::string value = std::to_string(n.value);
  switch (n.kind) {
  case tx::KernelInt::Constant: return value;
  case tx::KernelInt::TpRankTimes: return "ctx.tp->rank() * " + value;
  case tx::KernelInt::TpSizeTimes: return "ctx.tp->size() * " + value;
  case tx::KernelInt::DecodePosition: return "ctx.kv_cache->position";
  }
  llvm_unreachable("a kind of KernelInt");
}

std::string FunctionEmitter::argument(const tx::KernelArg &a) {
  std::string text;
  switch (a.kind) {
  case tx::KernelArg::Buffer: return ptr(a.value);
  case tx::KernelArg::Deref:
  case tx::KernelArg::HostScalar: return "*" + ptr(a.value);
  case tx::KernelArg::Call: return nestedCall(*a.call);
  case tx::KernelArg::StepContext: return "ctx";
  case tx::KernelArg::KvCache: return "*ctx.kv_cache";
  case tx::KernelArg::Layer: return "ctx.layer";
  case tx::KernelArg::Int: text = integerExpr(a.number); break;
  case tx::KernelArg::Bool: text = a.flag ? "true" : "false"; break;
  case tx::KernelArg::Float: text = floatLiteral(a.real); break;
  case tx::KernelArg::IntList:
    text = "{";
    for (auto [i, n] : llvm::enumerate(a.numbers))
      text += (i ? ", " : "") + integerExpr(n);
    text += "}";
    break;
  }
  return a.label.empty() ? text : labelled(a.label, text);
}

std::string FunctionEmitter::nestedCall(const tx::KernelCall &call) {
  std::string text = callee(call.kernel) + "(";
  for (auto [i, a] : llvm::enumerate(call.args))
    text += (i ? ", " : "") + argument(a);
  return text + ")";
}

LogicalResult FunctionEmitter::emitCall(Operation &op, const tx::KernelCall &call) {
  const unsigned traits = kernelTraits(call.kernel);
  if (onDevice() && (traits & tx::CpuOnly))
    return unsupported(op, kernelName(call.kernel).str() + " has no CUDA kernel yet");
  // On the GPU only the runtime's dloss argument (passed by address) is host memory.
  for (const tx::KernelArg &a : call.args)
    if (a.kind == tx::KernelArg::HostScalar && onDevice() && ptr(a.value) != kDlossArg)
      return unsupported(op, "the loss gradient must be the step's dloss argument for the CUDA target");
  std::vector<std::string> args;
  for (const tx::KernelArg &a : call.args)
    args.push_back(argument(a));
  os << "  ";
  if ((traits & tx::ScalarResult) && !onDevice()) { // the CPU kernel returns the scalar
    os << "*" << args.front() << " = ";
    args.erase(args.begin());
  }
  if (!onDevice() && call.kernel == Kernel::zero_buffer)
    args.insert(args.begin() + 1, "0");
  os << callee(call.kernel) << "(";
  llvm::interleaveComma(args, os);
  os << ");\n";
  return success();
}

/// Whether collective `op` is overlapped: started where it stands, waited for by its tx.wait_collective.
static bool overlapped(Operation *op) {
  return llvm::any_of(op->getUsers(), [](Operation *u) { return isa<tx::WaitCollectiveOp>(u); });
}

LogicalResult FunctionEmitter::emitOp(Operation &op) {
  for (Value r : op.getResults())
    if (auto it = arenaDecl.find(r); it != arenaDecl.end())
      os << it->second << "\n";
  auto callWith = [&](Kernel kernel, ArrayRef<std::string> args) {
    os << "  " << kernelName(kernel) << "(";
    llvm::interleaveComma(args, os);
    os << ");\n";
  };
  auto call = [&](Kernel kernel, std::initializer_list<std::string> args) {
    callWith(kernel, ArrayRef<std::string>(args.begin(), args.size()));
  };
  auto n = [](int64_t v) { return std::to_string(v); };
  auto L = [](StringRef label, const std::string &value) { return labelled(label, value); };
  // An overlapped collective of `count` elements: started here, waited for at its tx.wait_collective.
  auto startOverlapped = [&](const std::string &comm, StringRef method, Value result, Value input, int64_t count) {
    const std::string request = ptr(result) + "_pending";
    os << "  auto " << request << " = " << comm << "->" << method << "(" << ptr(result) << ", " << ptr(input) << ", "
       << L("count", n(count)) << "); // overlapped: waited for where it is first read\n";
    pending[result] = {comm, request};
  };

  return llvm::TypeSwitch<Operation *, LogicalResult>(&op)
      .Case([&](tx::ParamOp p) -> LogicalResult {
        if (!sig.hasParams)
          return unsupported(op, "tx.param must be in a function that gets the parameter table");
        if (p.getFrozen()) { // read, never trained: the runtime's frozen table
          std::optional<int64_t> k = sig.frozenParams ? sig.frozenParams->find(p) : std::nullopt;
          if (!k)
            return unsupported(op, "internal: the frozen parameter is not in its function's frozen table");
          if (p->use_empty())
            return success();
          std::string name = sig.names.take(p.getResult());
          names[p] = name;
          if (p.getNf4Block()) // QLoRA's base: tx.matmul_nf4 (or tx.nf4_dequantize) reads it
            os << "  const megart::Nf4Weight *" << name << " = ctx.frozen_nf4[" << *k << "]; // " << p.getName()
               << " " << typeString(p.getType()) << ", frozen, NF4 in blocks of " << *p.getNf4Block() << "\n";
          else
            os << "  const float *" << name << " = ctx.frozen[" << *k << "]; // " << p.getName() << " "
               << typeString(p.getType()) << ", frozen\n";
          return success();
        }
        std::optional<int64_t> k = params.find(p);
        if (!k)
          return unsupported(op, "internal: the parameter is not in its function's parameter table");
        if (p->use_empty()) // ZeRO-3 reads it from its gathered bucket instead
          return success();
        std::string name = sig.names.take(p.getResult());
        names[p] = name;
        os << "  const float *" << name << " = params[" << *k << "]; // " << p.getName() << " "
           << typeString(p.getType()) << "\n";
        return success();
      })
      .Case([&](tx::ParamGradOp g) -> LogicalResult {
        auto param = g.getParam().getDefiningOp<tx::ParamOp>();
        std::optional<int64_t> k = param ? params.find(param) : std::nullopt;
        if (!k)
          return unsupported(op, "the gradient of a value that is not a parameter of the function's table");
        std::string grad = "grads[" + n(*k) + "]";
        os << "  // gradient of " << param.getName() << "\n";
        call(Kernel::add, {grad, grad, ptr(g.getGrad()), L("outer", "1"), L("inner", n(numel(g.getGrad())))});
        return success();
      })
      .Case([&](tx::StartGradSyncOp s) -> LogicalResult {
        if (!sig.hasParams)
          return unsupported(op, "tx.start_grad_sync must be in a function that gets the parameter table");
        int64_t first = s.getFirst(), last = s.getLast();
        if (first < 0 || last < first || last >= params.size())
          return unsupported(op, "bucket params [" + std::to_string(first) + ", " + std::to_string(last) +
                                     "] is outside the parameter table");
        // An expert-parallel rank's experts (a bucket of its own) sum over the ranks holding the same.
        const std::string expertGroup = tx::holdsExpertBlock(params[first])
                                            ? communicatorName(names::kEpGrid, {static_cast<int16_t>(EpGridAxis::ExpertDp)})
                                            : "";
        if (std::optional<uint64_t> shard = s.getShardNumel()) {
          // The distributed optimizer's flat bucket starts at its last parameter.
          os << "  if (ctx.grad_sync) // the distributed optimizer: the bucket's gradients are final; reduce-scatter "
                "them during backward\n"
             << "    ctx.grad_sync->start_reduce_scatter(grads[" << last << "], " << *shard
             << (expertGroup.empty() ? "" : ", " + expertGroup) << ");\n";
          return success();
        }
        os << "  if (ctx.grad_sync) // data parallel: the bucket's gradients are final; sum them during backward\n";
        emitBucketStart(os, "    ", first, last, params[last].getType().getNumElements(), expertGroup);
        return success();
      })
      .Case([&](tx::ReshapeOp r) {
        names[r] = ptr(r.getInput());
        return success();
      })
      .Case([&](tx::GradBucketInitOp z) {
        os << "  // gradients of params[" << z.getFirst() << ", " << z.getLast()
           << "], staged for their reduce-scatter\n";
        os << "  " << (onDevice() ? kernelName(Kernel::zero_buffer) : "std::memset") << "(" << ptr(z)
           << (onDevice() ? ", " : ", 0, ") << L("bytes", n(bytesOf(z))) << ");\n";
        return success();
      })
      .Case([&](tx::GradBucketAddOp a) {
        names[a] = ptr(a.getBucket());
        std::string at = ptr(a) + " + " + n(a.getOffset());
        call(Kernel::add, {at, at, ptr(a.getGrad()), L("outer", "1"), L("inner", n(numel(a.getGrad())))});
        return success();
      })
      .Case([&](tx::LocalParamShardOp l) -> LogicalResult {
        if (!sig.hasParams)
          return unsupported(op, "tx.local_param_shard must be in a function that gets the step context");
        names[l] = "(ctx.param_shards + " + n(l.getOffset()) + ")";
        return success();
      })
      .Case([&](tx::BucketParamOp v) {
        names[v] = "(" + ptr(v.getBucket()) + " + " + n(v.getOffset()) + ")";
        return success();
      })
      .Case([&](tx::WaitParamGatherOp w) -> LogicalResult {
        if (!sig.hasParams)
          return unsupported(op, "tx.wait_param_gather must be in a function that gets the step context");
        os << "  if (ctx.param_gathers) // the last step's all-gather of params[" << w.getFirst() << ", " << w.getLast()
           << "] ran on until here\n"
           << "    ctx.param_gathers->wait(" << w.getBucket() << ");\n";
        return success();
      })
      .Case([&](tx::AddGradShardOp a) -> LogicalResult {
        if (!sig.hasParams)
          return unsupported(op, "tx.add_grad_shard must be in a function that gets the step context");
        std::string at = "ctx.grad_shards + " + n(a.getOffset());
        os << "  // this rank's shard of params[" << a.getFirst() << ", " << a.getLast() << "]'s summed gradients\n";
        call(Kernel::add, {at, at, ptr(a.getValue()), L("outer", "1"), L("inner", n(numel(a.getValue())))});
        return success();
      })
      .Case([&](shard::AllReduceOp r) -> LogicalResult {
        FailureOr<std::string> comm = communicator(op, r.getGrid(), r.getGridAxes());
        if (failed(comm))
          return failure();
        bool max = r.getReduction() == shard::ReductionKind::Max;
        ruleComment(r);
        if (ptr(r) != ptr(r.getInput()))
          copy(ptr(r), ptr(r.getInput()), bytesOf(r));
        os << "  " << *comm << "->" << (max ? "all_reduce_max(" : "all_reduce_sum(") << ptr(r) << ", "
           << L("count", n(numel(r))) << ");\n";
        return success();
      })
      .Case([&](shard::AllGatherOp g) -> LogicalResult {
        FailureOr<std::string> comm = communicator(op, g.getGrid(), g.getGridAxes());
        if (failed(comm))
          return failure();
        ArrayRef<int64_t> in = shapeOf(g.getInput());
        int64_t d = g.getGatherAxis().getZExtValue();
        ruleComment(g);
        if (overlapped(g)) {
          if (in.size() != 1)
            return unsupported(op, "an overlapped all-gather of more than one dimension");
          startOverlapped(*comm, "iall_gather", g.getResult(), g.getInput(), in[0]);
          return success();
        }
        call(Kernel::all_gather_axis, {"*" + *comm, ptr(g), ptr(g.getInput()), L("outer", n(prod(in.take_front(d)))),
                                 L("dim_local", n(in[d])), L("inner", n(prod(in.drop_front(d + 1))))});
        return success();
      })
      .Case([&](shard::ReduceScatterOp g) -> LogicalResult {
        FailureOr<std::string> comm = communicator(op, g.getGrid(), g.getGridAxes());
        if (failed(comm))
          return failure();
        ArrayRef<int64_t> out = shapeOf(g.getResult());
        int64_t d = g.getScatterAxis().getZExtValue();
        ruleComment(g);
        if (overlapped(g)) {
          if (out.size() != 1)
            return unsupported(op, "an overlapped reduce-scatter of more than one dimension");
          startOverlapped(*comm, "ireduce_scatter_sum", g.getResult(), g.getInput(), out[0]);
          return success();
        }
        call(Kernel::reduce_scatter_axis,
             {"*" + *comm, ptr(g), ptr(g.getInput()), L("outer", n(prod(out.take_front(d)))), L("dim_local", n(out[d])),
              L("inner", n(prod(out.drop_front(d + 1))))});
        return success();
      })
      .Case([&](shard::AllSliceOp g) -> LogicalResult {
        FailureOr<std::string> comm = communicator(op, g.getGrid(), g.getGridAxes());
        if (failed(comm))
          return failure();
        ArrayRef<int64_t> out = shapeOf(g.getResult());
        int64_t d = g.getSliceAxis().getZExtValue();
        ruleComment(g);
        call(Kernel::all_slice_axis, {"*" + *comm, ptr(g), ptr(g.getInput()), L("outer", n(prod(out.take_front(d)))),
                                L("dim_local", n(out[d])), L("inner", n(prod(out.drop_front(d + 1))))});
        return success();
      })
      .Case([&](tx::WaitCollectiveOp w) -> LogicalResult {
        auto it = pending.find(w.getPending());
        if (it == pending.end())
          return unsupported(op, "a wait for a collective that was not started here (an overlapped all-gather or "
                                 "reduce-scatter of one dimension)");
        os << "  " << it->second.first << "->wait(*" << it->second.second << ");\n";
        pending.erase(it);
        return success();
      })
      .Case([&](tx::KernelCallOpInterface k) -> LogicalResult {
        FailureOr<tx::KernelCall> kernelCall = k.getKernelCall(sig.decode);
        return failed(kernelCall) ? failure() : emitCall(op, *kernelCall);
      })
      .Case([&](func::CallOp c) {
        // A layer's function draws that layer's dropout masks.
        auto layer = c->getAttrOfType<IntegerAttr>(names::kLayerIndexAttr);
        if (!layer && drawsDropout(c))
          return unsupported(op, "the callee draws dropout masks, which need the call's " +
                                     names::kLayerIndexAttr.str() + " (the layer's index)");
        // A recomputed layer's rerun reports nothing (its first run did).
        const char *forLayer = c->hasAttr(names::kRecomputeAttr) ? "ctx.for_recomputed_layer(" : "ctx.for_layer(";
        os << "  " << c.getCallee() << "(" << (layer ? forLayer + n(layer.getInt()) + ")" : "ctx")
           << ", ws + " << frameBytes;
        for (Value a : c.getOperands())
          os << ",\n      " << ptr(a);
        for (Value r : c.getResults())
          os << ",\n      " << ptr(r);
        os << ");\n";
        return success();
      })
      .Case([&](func::ReturnOp r) -> LogicalResult {
        if (!pending.empty())
          return unsupported(op, "internal: a collective started in this function is never waited for");
        for (auto [i, v] : llvm::enumerate(r.getOperands()))
          if (!sig.results[i].empty() && ptr(v) != sig.results[i])
            copy(sig.results[i], ptr(v), bytesOf(v));
        if (sig.returnedScalar >= 0)
          os << "  return "
             << (onDevice()
                     ? std::string(kernelName(Kernel::read_scalar)) + "(" + ptr(r.getOperand(sig.returnedScalar)) + ")"
                     : "*" + ptr(r.getOperand(sig.returnedScalar)))
             << ";\n";
        else if (!sig.returnDefault.empty())
          os << "  return " << sig.returnDefault << ";\n";
        return success();
      })
      .Default([&](Operation *) { return unsupported(op, "no C++ lowering for this op"); });
}

} // namespace

std::string communicatorName(StringRef grid, ArrayRef<int16_t> axes) {
  if (axes.size() != 1)
    return "";
  if (grid == names::kDpGrid && (axes[0] == 0 || axes[0] == 1))
    return "ctx." + dpGridAxisName(static_cast<DpGridAxis>(axes[0])).str();
  if (grid == names::kEpGrid && (axes[0] == 0 || axes[0] == 1))
    return "ctx." + epGridAxisName(static_cast<EpGridAxis>(axes[0])).str();
  if (grid != names::kGrid || axes[0] < 0 || axes[0] > static_cast<int16_t>(GridAxis::Tp))
    return "";
  return "ctx." + gridAxisName(static_cast<GridAxis>(axes[0])).str();
}

void emitBucketStart(llvm::raw_ostream &os, llvm::StringRef indent, int64_t first, int64_t last, int64_t lastNumel,
                     llvm::StringRef group) {
  os << indent << "ctx.grad_sync->start(grads[" << first << "], (grads[" << last << "] + " << lastNumel << ") - grads["
     << first << "]" << (group.empty() ? "" : ", " + group.str()) << ");\n";
}

FailureOr<int64_t> emitFunction(func::FuncOp fn, Signature sig, const tx::ParamTable &params, llvm::raw_ostream &os,
                                llvm::raw_ostream &plan) {
  return FunctionEmitter(fn, sig, params, os).emit(plan);
}

Signature calleeSignature(func::FuncOp fn, bool decode) {
  Signature sig;
  sig.decode = decode;
  sig.prototype = "void " + fn.getName().str() + "(const megart::StepContext &ctx, char *ws";
  Block &body = fn.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    std::string name = sig.names.take(arg, "arg");
    // A QLoRA base weight comes as the runtime's NF4 tensor, which a kernel reads through its
    // pointer (tx.nf4_dequantize, tx.matmul_nf4's weight).
    const bool nf4 = llvm::any_of(arg.getUsers(), [&](Operation *user) {
      std::optional<tx::KernelCall> kernelCall = tx::quietKernelCall(user, decode);
      return kernelCall && llvm::any_of(kernelCall->args, [&](const tx::KernelArg &a) {
               return a.kind == tx::KernelArg::Deref && a.value == arg;
             });
    });
    sig.prototype += ",\n    const " + (nf4 ? std::string("megart::Nf4Weight") : cppElementType(arg.getType())) + " *" +
                     name + " /* " + typeString(arg.getType()) + (nf4 ? ", NF4" : "") + " */";
    sig.args.push_back(name);
  }
  for (Value returned : body.getTerminator()->getOperands()) {
    std::string name = sig.names.take(returned, "result");
    sig.prototype += ",\n    " + cppElementType(returned.getType()) + " *" + name + " /* " + typeString(returned.getType()) + " */";
    sig.results.push_back(name);
  }
  sig.prototype += ") {";
  return sig;
}

} // namespace megac::emit
