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
  return e.isF32() ? "float" : e.isBF16() ? "megart::bf16_t" : e.isF16() ? "megart::fp16_t" : "";
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
/// hide them); the kernels' are in RuntimeKernels.def.
// clang-format off
constexpr const char *kProgramNames[] = {
    "ctx", "ws", "params", "grads", "ids", "labels", "dloss", "stash", "input", "output", "input_grad",
    "output_grad", "megart", "std", "p", "main", "int32_t", "int64_t", "size_t"};
// clang-format on

/// A runtime kernel the generated code calls, and its name.
enum class Kernel {
#define MEGART_KERNEL(name) name,
#include "RuntimeKernels.def"
};
constexpr const char *kKernelNames[] = {
#define MEGART_KERNEL(name) #name,
#include "RuntimeKernels.def"
};
const char *kernelName(Kernel k) { return kKernelNames[static_cast<int>(k)]; }

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
  for (const char *name : kKernelNames)
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
  /// Rank-dependent start of this rank's share of a vocabulary of `local` rows.
  std::string vocabStart(int64_t local) { return "ctx.tp->rank() * " + std::to_string(local); }
  /// Real (not padding) columns of this rank's share of `local` vocabulary columns.
  std::string validColumns(std::optional<uint64_t> vocabSize, int64_t local) {
    if (!vocabSize)
      return std::to_string(local);
    return std::string(kernelName(Kernel::valid_columns)) + "(" + labelled("vocab_size", std::to_string(*vocabSize)) +
           ", " + vocabStart(local) + ", " + labelled("vocab_local", std::to_string(local)) + ")";
  }
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
  /// The loss gradient a cross-entropy backward scales by, as a host float: on the GPU only the
  /// runtime's dloss argument (passed by address) is host memory.
  FailureOr<std::string> hostScalar(Operation &op, Value v) {
    if (onDevice() && ptr(v) != kDlossArg)
      return unsupported(op, "the loss gradient must be the step's dloss argument for the CUDA target");
    return "*" + ptr(v);
  }
  /// `out = kernel(args)` for a kernel that returns a scalar on the CPU; its CUDA twin writes the
  /// scalar to device memory instead.
  void scalarCall(Value out, Kernel kernel, const std::string &args) {
    if (onDevice())
      os << "  " << kernelName(kernel) << "(" << ptr(out) << ", " << args << ");\n";
    else
      os << "  *" << ptr(out) << " = " << kernelName(kernel) << "(" << args << ");\n";
  }
  LogicalResult unsupported(Operation &op, StringRef why) {
    return op.emitOpError() << "cannot be emitted as C++: " << why;
  }
  /// Where this rank's block of `v` starts along each dimension, and the global size: a
  /// dimension megac-tensor-parallel split over tp starts at the rank's share.
  FailureOr<std::pair<std::string, std::string>> globalPlacement(Operation &op, Value v) {
    ArrayRef<int64_t> shape = cast<RankedTensorType>(v.getType()).getShape();
    tx::ShardingAttr sharding = tx::recordedSharding(v);
    if (sharding && !sharding.getPartial().empty())
      return unsupported(op, "dropout of partial sums (megac-tensor-parallel makes them whole first)");
    std::optional<int64_t> split = sharding ? sharding.splitDim(names::kTensorAxis) : std::nullopt;
    if (split && *split == 0)
      return unsupported(op, "dropout of a value split over tp along its batch dimension");
    std::string offsets = "{", extents = "{";
    for (auto [d, size] : llvm::enumerate(shape)) {
      const bool tp = split && static_cast<int64_t>(d) == *split;
      offsets += (d ? ", " : "") + (tp ? "ctx.tp->rank() * " + std::to_string(size) : std::string("0"));
      extents += (d ? ", " : "") + (d == 0 ? std::string("0") : tp ? "ctx.tp->size() * " + std::to_string(size)
                                                                 : std::to_string(size));
    }
    return std::make_pair(offsets + "}", extents + "}");
  }
  /// `megart::dropout_block(ctx, ...)`: the dropout op's rate, stream and this rank's block.
  FailureOr<std::string> dropoutBlock(tx::DropoutOp d) {
    auto placement = globalPlacement(*d, d.getResult());
    if (failed(placement))
      return failure();
    std::string shape = "{";
    for (auto [i, size] : llvm::enumerate(shapeOf(d.getResult())))
      shape += (i ? ", " : "") + std::to_string(size);
    return "megart::dropout_block(ctx, " + labelled("rate", floatLiteral(d.getRate().convertToDouble())) + ", " +
           labelled("stream", std::to_string(d.getStream())) + ", " + labelled("shape", shape + "}") + ", " +
           labelled("offset", placement->first) + ", " + labelled("extent", placement->second) + ")";
  }
  /// `megart::attention_dropout(ctx, ...)` for an attention (or its gradient) on `query` whose
  /// probabilities are dropped at `rate`; "" without dropout.
  FailureOr<std::string> attentionDropout(Operation &op, FloatAttr rateAttr, Value query) {
    const double rate = rateAttr ? rateAttr.getValueAsDouble() : 0.0;
    if (rate == 0.0)
      return std::string();
    const int64_t heads = shapeOf(query)[2];
    tx::ShardingAttr sharding = tx::recordedSharding(query);
    std::optional<int64_t> split = sharding ? sharding.splitDim(names::kTensorAxis) : std::nullopt;
    if (split && *split != 2)
      return unsupported(op, "attention dropout with the query split over tp along a dimension other than heads");
    const std::string h = std::to_string(heads);
    return "megart::attention_dropout(ctx, " + labelled("rate", floatLiteral(rate)) + ", " +
           labelled("stream", std::to_string(names::kAttentionDropoutStream)) + ", " +
           labelled("head_offset", split ? "ctx.tp->rank() * " + h : std::string("0")) + ", " +
           labelled("heads", split ? "ctx.tp->size() * " + h : h) + ")";
  }

  func::FuncOp fn;
  Signature &sig;
  const tx::ParamTable &params;
  llvm::raw_ostream &os;
  DenseMap<Value, std::string> names; // the C++ expression of each value's buffer
  DenseMap<Value, std::string> arenaDecl;
  int64_t frameBytes = 0;       // where a callee's workspace starts
  IntegerAttr workspaceBytes;   // with the deepest callee's
  // Collectives started (megac.async) and not yet waited for: the result's buffer -> the C++
  // communicator and the request's name.
  llvm::MapVector<Value, std::pair<std::string, std::string>> pending;
  /// Waits for the collectives whose results `op` reads (or, at the return, for every one left).
  void waitFor(Operation &op);
};

/// Whether the function `call` calls draws dropout masks (a dropout op or an attention with a
/// nonzero rate).
bool drawsDropout(func::CallOp call) {
  auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
  if (!callee)
    return false;
  WalkResult r = callee.walk([](Operation *op) {
    FloatAttr rate;
    if (auto d = dyn_cast<tx::DropoutOp>(op))
      rate = d.getRateAttr();
    else if (auto a = dyn_cast<tx::AttentionOp>(op))
      rate = a.getDropoutAttr();
    else if (auto g = dyn_cast<tx::AttentionGradOp>(op))
      rate = g.getDropoutAttr();
    return rate && rate.getValueAsDouble() != 0.0 ? WalkResult::interrupt() : WalkResult::advance();
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
                                << "; the C++ emitter handles f32, bf16 and f16 tensors only";
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

void FunctionEmitter::waitFor(Operation &op) {
  for (auto it = pending.begin(); it != pending.end();) {
    if (waitsFor(op, it->first)) {
      os << "  " << it->second.first << "->wait(*" << it->second.second << ");\n";
      it = pending.erase(it);
    } else {
      ++it;
    }
  }
}

LogicalResult FunctionEmitter::emitOp(Operation &op) {
  waitFor(op);
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
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  auto L = [](StringRef label, const std::string &value) { return labelled(label, value); };
  // An overlapped collective of `count` elements: started here, waited for by waitFor.
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
        if (std::optional<uint64_t> shard = s.getShardNumel()) {
          // The distributed optimizer's flat bucket starts at its last parameter.
          os << "  if (ctx.grad_sync) // the distributed optimizer: the bucket's gradients are final; reduce-scatter "
                "them during backward\n"
             << "    ctx.grad_sync->start_reduce_scatter(grads[" << last << "], " << *shard << ");\n";
          return success();
        }
        os << "  if (ctx.grad_sync) // data parallel: the bucket's gradients are final; sum them during backward\n";
        emitBucketStart(os, "    ", first, last, params[last].getType().getNumElements());
        return success();
      })
      .Case([&](tx::ReshapeOp r) {
        names[r] = ptr(r.getInput());
        return success();
      })
      .Case([&](tx::Nf4DequantizeOp d) -> LogicalResult {
        if (onDevice())
          return unsupported(op, "tx.nf4_dequantize (QLoRA) has no CUDA kernel yet");
        os << "  megart::nf4_dequantize(" << ptr(d) << ", *" << ptr(d.getWeight()) << ");\n";
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
      .Case([&](tx::ZerosOp z) {
        os << "  " << (onDevice() ? kernelName(Kernel::zero_buffer) : "std::memset") << "(" << ptr(z)
           << (onDevice() ? ", " : ", 0, ") << L("bytes", n(bytesOf(z))) << ");\n";
        return success();
      })
      .Case([&](tx::EmbeddingOp e) {
        ArrayRef<int64_t> t = shapeOf(e.getTable());
        if (e.getVocabParallel())
          call(Kernel::embedding_forward_shard,
               {ptr(e), ptr(e.getTable()), ptr(e.getIds()), L("tokens", n(numel(e.getIds()))),
                L("vocab_local", n(t[0])), L("dim", n(t[1])), vocabStart(t[0])});
        else
          call(Kernel::embedding_forward, {ptr(e), ptr(e.getTable()), ptr(e.getIds()),
                                           L("tokens", n(numel(e.getIds()))), L("vocab", n(t[0])), L("dim", n(t[1]))});
        return success();
      })
      .Case([&](tx::EmbeddingGradOp e) {
        ArrayRef<int64_t> t = shapeOf(e.getResult());
        if (e.getVocabParallel())
          call(Kernel::embedding_backward_shard,
               {ptr(e), ptr(e.getGrad()), ptr(e.getIds()), L("tokens", n(numel(e.getIds()))), L("vocab_local", n(t[0])),
                L("dim", n(t[1])), vocabStart(t[0])});
        else
          call(Kernel::embedding_backward, {ptr(e), ptr(e.getGrad()), ptr(e.getIds()),
                                            L("tokens", n(numel(e.getIds()))), L("vocab", n(t[0])), L("dim", n(t[1]))});
        return success();
      })
      .Case([&](tx::LogitsMaxOp m) {
        int64_t v = shapeOf(m.getLogits()).back();
        call(Kernel::logits_max, {ptr(m), ptr(m.getLogits()), L("tokens", n(numel(m))), L("vocab", n(v)),
                            validColumns(m.getVocabSize(), v)});
        return success();
      })
      .Case([&](tx::LogitsSumExpOp m) {
        int64_t v = shapeOf(m.getLogits()).back();
        call(Kernel::logits_sum_exp, {ptr(m), ptr(m.getLogits()), ptr(m.getMax()), L("tokens", n(numel(m))),
                                      L("vocab", n(v)), validColumns(m.getVocabSize(), v)});
        return success();
      })
      .Case([&](tx::TargetLogitOp t) {
        int64_t v = shapeOf(t.getLogits()).back();
        call(Kernel::target_logit, {ptr(t), ptr(t.getLogits()), ptr(t.getLabels()), L("tokens", n(numel(t))),
                              L("vocab", n(v)), t.getVocabParallel() ? vocabStart(v) : L("vocab_start", "0")});
        return success();
      })
      .Case([&](tx::CrossEntropyFromStatsOp c) {
        scalarCall(c, Kernel::cross_entropy_from_stats,
                   ptr(c.getMax()) + ", " + ptr(c.getSumExp()) + ", " + ptr(c.getTarget()) + ", " +
                       L("tokens", n(numel(c.getMax()))));
        return success();
      })
      .Case([&](tx::CrossEntropyGradFromStatsOp c) -> LogicalResult {
        int64_t v = shapeOf(c.getLogits()).back();
        FailureOr<std::string> dloss = hostScalar(op, c.getGrad());
        if (failed(dloss))
          return failure();
        call(Kernel::cross_entropy_backward_from_stats,
             {ptr(c), *dloss, ptr(c.getLogits()), ptr(c.getLabels()), ptr(c.getMax()), ptr(c.getSumExp()),
              L("tokens", n(numel(c.getMax()))), L("vocab", n(v)),
              c.getVocabParallel() ? vocabStart(v) : L("vocab_start", "0"), validColumns(c.getVocabSize(), v)});
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
        if (g->hasAttr(names::kAsyncAttr)) {
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
        if (g->hasAttr(names::kAsyncAttr)) {
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
      .Case([&](tx::MatmulOp m) {
        ArrayRef<int64_t> l = shapeOf(m.getLhs()), r = shapeOf(m.getRhs());
        bool ta = m.getTransposeLhs(), tb = m.getTransposeRhs();
        const tx::GemmShape g = m.getGemmShape(); // a shared rhs folds the batch into m
        if (r.size() == 2) {
          if (ta && l.size() > 2)
            return unsupported(op, "transpose_lhs with a shared rhs and batched lhs");
          SmallVector<std::string> args{ptr(m), ptr(m.getLhs()), ptr(m.getRhs()), L("m", n(g.m)), L("n", n(g.n)),
                                        L("k", n(g.k)), L("transpose_a", b(ta)), L("transpose_b", b(tb))};
          if (m.getScale()) // the GEMM's alpha
            args.push_back(L("alpha", floatLiteral(m.getScale()->convertToDouble())));
          callWith(Kernel::gemm, args);
          return success();
        }
        SmallVector<std::string> args{ptr(m), ptr(m.getLhs()), ptr(m.getRhs()), L("batch", n(g.batch)),
                                      L("m", n(g.m)), L("n", n(g.n)), L("k", n(g.k)), L("transpose_a", b(ta)),
                                      L("transpose_b", b(tb)), L("stride_a", n(prod(l.take_back(2)))),
                                      L("stride_b", n(prod(r.take_back(2)))), L("stride_c", n(g.m * g.n))};
        if (m.getScale())
          args.push_back(L("alpha", floatLiteral(m.getScale()->convertToDouble())));
        callWith(Kernel::gemm_batched, args);
        return success();
      })
      .Case([&](tx::MatmulNf4Op l) -> LogicalResult {
        if (onDevice())
          return unsupported(op, "tx.matmul_nf4 (QLoRA) has no CUDA kernel yet");
        bool tb = l.getTransposeRhs();
        const tx::GemmShape g = l.getGemmShape();
        call(Kernel::gemm_nf4, {ptr(l), ptr(l.getInput()), "*" + ptr(l.getWeight()), L("m", n(g.m)), L("n", n(g.n)),
                          L("k", n(g.k)), L("transpose_b", b(tb))});
        return success();
      })
      .Case<tx::MatmulBiasOp, tx::MatmulBiasGeluOp>([&](auto l) {
        // The GEMM's rows, columns and contraction, then the bias: "in, weight, bias, m, n, k, tb".
        bool tb = l.getTransposeRhs();
        const tx::GemmShape g = l.getGemmShape();
        std::string gemm = ptr(l.getInput()) + ", " + ptr(l.getWeight()) + ", " + ptr(l.getBias()) + ", " +
                           L("m", n(g.m)) + ", " + L("n", n(g.n)) + ", " + L("k", n(g.k)) + ", " +
                           L("transpose_b", b(tb));
        if constexpr (std::is_same_v<decltype(l), tx::MatmulBiasOp>)
          os << "  " << kernelName(Kernel::gemm_bias) << "(" << ptr(l) << ", " << gemm << ");\n";
        else
          os << "  " << kernelName(Kernel::gemm_bias_gelu) << "(" << ptr(l.getPre()) << ", " << ptr(l.getResult())
             << ", " << gemm << ", " << L("tanh", b(l.getApproximation() == tx::GeluApproximation::Tanh)) << ");\n";
        return success();
      })
      .Case<tx::AddOp, tx::MulOp>([&](auto e) {
        int64_t inner = numel(e.getRhs());
        call(isa<tx::AddOp>(op) ? Kernel::add : Kernel::mul, {ptr(e), ptr(e.getLhs()), ptr(e.getRhs()),
                                                  L("outer", n(numel(e.getLhs()) / inner)), L("inner", n(inner))});
        return success();
      })
      .Case([&](tx::ReduceSumOp r) {
        int64_t inner = numel(r.getResult());
        call(Kernel::reduce_sum_leading,
             {ptr(r), ptr(r.getInput()), L("outer", n(numel(r.getInput()) / inner)), L("inner", n(inner))});
        return success();
      })
      .Case<tx::SliceOp, tx::PadOp>([&](auto s) {
        ArrayRef<int64_t> in = shapeOf(s.getInput()), out = shapeOf(s.getResult());
        int64_t d = s.getDim();
        // Decoding, the learned positions' row is the position being computed.
        auto param = s.getInput().template getDefiningOp<tx::ParamOp>();
        const bool position = sig.decode && isa<tx::SliceOp>(op) && param && param.getRole() &&
                              *param.getRole() == tx::ParamRole::PositionEmbedding && d == 0;
        call(isa<tx::SliceOp>(op) ? Kernel::slice : Kernel::pad,
             {ptr(s), ptr(s.getInput()), L("outer", n(prod(in.take_front(d)))), L("in_dim", n(in[d])),
              L("out_dim", n(out[d])), L("inner", n(prod(in.drop_front(d + 1)))),
              L("offset", position ? "ctx.kv_cache->position" : n(s.getOffset()))});
        return success();
      })
      .Case([&](tx::LayerNormOp ln) {
        int64_t h = shapeOf(ln.getInput()).back();
        call(Kernel::layer_norm_forward, {ptr(ln), ptr(ln.getInput()), ptr(ln.getWeight()), ptr(ln.getBias()),
                                    L("rows", n(numel(ln.getInput()) / h)), L("dim", n(h)),
                                    L("eps", floatLiteral(ln.getEpsilon().convertToDouble()))});
        return success();
      })
      .Case([&](tx::LayerNormGradOp g) {
        int64_t h = shapeOf(g.getInput()).back();
        call(Kernel::layer_norm_backward,
             {ptr(g.getInputGrad()), ptr(g.getWeightGrad()), ptr(g.getBiasGrad()), ptr(g.getGrad()), ptr(g.getInput()),
              ptr(g.getWeight()), L("rows", n(numel(g.getInput()) / h)), L("dim", n(h)),
              L("eps", floatLiteral(g.getEpsilon().convertToDouble()))});
        return success();
      })
      .Case([&](tx::RmsNormOp rn) {
        int64_t h = shapeOf(rn.getInput()).back();
        call(Kernel::rms_norm_forward,
             {ptr(rn), ptr(rn.getInput()), ptr(rn.getWeight()), L("rows", n(numel(rn.getInput()) / h)), L("dim", n(h)),
              L("eps", floatLiteral(rn.getEpsilon().convertToDouble()))});
        return success();
      })
      .Case([&](tx::RmsNormGradOp g) {
        int64_t h = shapeOf(g.getInput()).back();
        call(Kernel::rms_norm_backward, {ptr(g.getInputGrad()), ptr(g.getWeightGrad()), ptr(g.getGrad()),
                                         ptr(g.getInput()), ptr(g.getWeight()), L("rows", n(numel(g.getInput()) / h)),
                                         L("dim", n(h)), L("eps", floatLiteral(g.getEpsilon().convertToDouble()))});
        return success();
      })
      .Case([&](tx::GeluOp g) {
        bool tanh = g.getApproximation() == tx::GeluApproximation::Tanh;
        call(tanh ? Kernel::gelu_tanh_forward : Kernel::gelu_erf_forward,
             {ptr(g), ptr(g.getInput()), L("n", n(numel(g)))});
        return success();
      })
      .Case([&](tx::GeluGradOp g) {
        bool tanh = g.getApproximation() == tx::GeluApproximation::Tanh;
        call(tanh ? Kernel::gelu_tanh_backward : Kernel::gelu_erf_backward,
             {ptr(g), ptr(g.getGrad()), ptr(g.getInput()), L("n", n(numel(g)))});
        return success();
      })
      .Case([&](tx::SwigluOp s) {
        call(Kernel::swiglu_forward, {ptr(s), ptr(s.getGate()), ptr(s.getUp()), L("n", n(numel(s)))});
        return success();
      })
      .Case([&](tx::SwigluGradOp s) {
        call(Kernel::swiglu_backward, {ptr(s.getGateGrad()), ptr(s.getUpGrad()), ptr(s.getGrad()), ptr(s.getGate()),
                                 ptr(s.getUp()), L("n", n(numel(s.getGrad())))});
        return success();
      })
      .Case([&](tx::DropoutOp d) {
        if (d.getRate().isZero()) {
          copy(ptr(d), ptr(d.getInput()), bytesOf(d));
          return success();
        }
        FailureOr<std::string> block = dropoutBlock(d);
        if (failed(block))
          return failure();
        call(Kernel::apply_dropout, {ptr(d), ptr(d.getInput()), *block});
        return success();
      })
      .Case([&](tx::RopeOp r) {
        ArrayRef<int64_t> s = shapeOf(r.getInput());
        call(Kernel::rope_forward,
             {ptr(r), ptr(r.getInput()), L("batch", n(s[0])), L("seq", n(s[1])), L("heads", n(s[2])),
              L("head_dim", n(s[3])), L("theta", floatLiteral(r.getTheta().convertToDouble())),
              L("position_offset", sig.decode ? "ctx.kv_cache->position" : "0"), L("inverse", b(r.getInverse()))});
        return success();
      })
      .Case([&](tx::AttentionOp a) {
        ArrayRef<int64_t> q = shapeOf(a.getQuery()), k = shapeOf(a.getKey());
        if (sig.decode) { // one position against the layer's cache
          if (q[1] != 1 || !a.getCausal())
            return unsupported(op, "decoding needs causal attention over one position");
          call(Kernel::attention_decode,
               {ptr(a), ptr(a.getQuery()), ptr(a.getKey()), ptr(a.getValue()), "*ctx.kv_cache", "ctx.layer",
                L("batch", n(q[0])), L("heads", n(q[2])), L("kv_heads", n(k[2])), L("head_dim", n(q[3])),
                L("scale", floatLiteral(a.getScale().convertToDouble()))});
          return success();
        }
        FailureOr<std::string> dropout = attentionDropout(op, a.getDropoutAttr(), a.getQuery());
        if (failed(dropout))
          return failure();
        std::vector<std::string> args{ptr(a), ptr(a.getQuery()), ptr(a.getKey()), ptr(a.getValue()),
                                      L("batch", n(q[0])), L("seq", n(q[1])), L("heads", n(q[2])),
                                      L("kv_heads", n(k[2])), L("head_dim", n(q[3])),
                                      L("scale", floatLiteral(a.getScale().convertToDouble())),
                                      L("causal", b(a.getCausal()))};
        if (!dropout->empty())
          args.push_back(*dropout);
        callWith(Kernel::attention_forward, args);
        return success();
      })
      .Case([&](tx::AttentionGradOp a) {
        ArrayRef<int64_t> q = shapeOf(a.getQuery()), k = shapeOf(a.getKey());
        FailureOr<std::string> dropout = attentionDropout(op, a.getDropoutAttr(), a.getQuery());
        if (failed(dropout))
          return failure();
        std::vector<std::string> args{
            ptr(a.getQueryGrad()), ptr(a.getKeyGrad()), ptr(a.getValueGrad()), ptr(a.getGrad()), ptr(a.getQuery()),
            ptr(a.getKey()), ptr(a.getValue()), L("batch", n(q[0])), L("seq", n(q[1])), L("heads", n(q[2])),
            L("kv_heads", n(k[2])), L("head_dim", n(q[3])), L("scale", floatLiteral(a.getScale().convertToDouble())),
            L("causal", b(a.getCausal()))};
        if (!dropout->empty())
          args.push_back(*dropout);
        callWith(Kernel::attention_backward, args);
        return success();
      })
      .Case([&](tx::CrossEntropyOp c) {
        int64_t v = shapeOf(c.getLogits()).back();
        scalarCall(c, Kernel::cross_entropy_forward,
                   ptr(c.getLogits()) + ", " + ptr(c.getLabels()) + ", " + L("tokens", n(numel(c.getLabels()))) + ", " +
                       L("vocab", n(v)) + ", " + L("vocab_size", n(c.getVocabSize().value_or(v))));
        return success();
      })
      .Case([&](tx::CrossEntropyGradOp c) -> LogicalResult {
        int64_t v = shapeOf(c.getLogits()).back();
        FailureOr<std::string> dloss = hostScalar(op, c.getGrad());
        if (failed(dloss))
          return failure();
        call(Kernel::cross_entropy_backward,
             {ptr(c), *dloss, ptr(c.getLogits()), ptr(c.getLabels()), L("tokens", n(numel(c.getLabels()))),
              L("vocab", n(v)), L("vocab_size", n(c.getVocabSize().value_or(v)))});
        return success();
      })
      .Case([&](func::CallOp c) {
        // A layer's function draws that layer's dropout masks.
        auto layer = c->getAttrOfType<IntegerAttr>(names::kLayerIndexAttr);
        if (!layer && drawsDropout(c))
          return unsupported(op, "the callee draws dropout masks, which need the call's " +
                                     names::kLayerIndexAttr.str() + " (the layer's index)");
        os << "  " << c.getCallee() << "(" << (layer ? "ctx.for_layer(" + n(layer.getInt()) + ")" : "ctx")
           << ", ws + " << frameBytes;
        for (Value a : c.getOperands())
          os << ",\n      " << ptr(a);
        for (Value r : c.getResults())
          os << ",\n      " << ptr(r);
        os << ");\n";
        return success();
      })
      .Case([&](func::ReturnOp r) {
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
  if (grid != names::kGrid || axes[0] < 0 || axes[0] > static_cast<int16_t>(GridAxis::Tp))
    return "";
  return "ctx." + gridAxisName(static_cast<GridAxis>(axes[0])).str();
}

void emitBucketStart(llvm::raw_ostream &os, llvm::StringRef indent, int64_t first, int64_t last, int64_t lastNumel) {
  os << indent << "ctx.grad_sync->start(grads[" << first << "], (grads[" << last << "] + " << lastNumel << ") - grads["
     << first << "]);\n";
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
    // A QLoRA base weight comes as the runtime's NF4 tensor, which tx.nf4_dequantize or
    // tx.matmul_nf4 (as its weight) reads.
    const bool nf4 = llvm::any_of(arg.getUses(), [](OpOperand &use) {
      auto fused = dyn_cast<tx::MatmulNf4Op>(use.getOwner());
      return isa<tx::Nf4DequantizeOp>(use.getOwner()) || (fused && use.get() == fused.getWeight());
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
