#include "megart/comm_nccl_rules.h"

#include "megart/error.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace megart {

NcclRules nccl_rules_requested() {
  const char *v = std::getenv("MEGART_NCCL_RULES");
  if (!v || !*v || std::strcmp(v, "0") == 0)
    return NcclRules::Off;
  if (std::strcmp(v, "1") == 0)
    return NcclRules::ChannelPerTag;
  if (std::strcmp(v, "one-channel") == 0)
    return NcclRules::OneChannel;
  throw Error(std::string("MEGART_NCCL_RULES is '") + v +
              "'; set it to 1 (NCCL's rules on the CPU, a channel per tag as megart's NCCL communicator), "
              "one-channel (one channel per peer) or 0");
}

namespace {

constexpr const char *kRule = "NCCL's rules (MEGART_NCCL_RULES): ";
// A header's integers travel as floats, exact below 2^24.
constexpr int64_t kExact = int64_t{1} << 24;

const char *const kOperations[] = {"all_reduce_sum",       "all_reduce_max",     "all_reduce_sum (double)",
                                   "all_gather",           "reduce_scatter_sum", "broadcast",
                                   "barrier",              "iall_reduce_sum",    "ireduce_scatter_sum",
                                   "iall_gather",          "all_reduce_sum_bf16", "iall_reduce_sum_bf16",
                                   "all_reduce_sum (bf16)", "all_reduce_sum (fp16)", "all_gather (bf16)",
                                   "all_gather (fp16)",    "reduce_scatter_sum (bf16)", "reduce_scatter_sum (fp16)",
                                   "all_to_all_v",         "all_to_all"};
constexpr int64_t kNumOperations = sizeof(kOperations) / sizeof(kOperations[0]);

int64_t operation_index(const char *operation) {
  for (int64_t i = 0; i < kNumOperations; ++i)
    if (std::strcmp(kOperations[i], operation) == 0)
      return i;
  throw Error(std::string("NcclRulesCommunicator: unknown operation ") + operation);
}

std::string describe_call(double operation, double n, double root) {
  const auto i = static_cast<int64_t>(operation);
  std::string s = i >= 0 && i < kNumOperations ? kOperations[i] : "?";
  if (n >= 0)
    s += " of " + std::to_string(static_cast<int64_t>(n)) + " elements";
  if (root >= 0)
    s += " from root " + std::to_string(static_cast<int64_t>(root));
  return s;
}

} // namespace

// One message and the header before it, both on the peer's one channel.
class NcclRulesCommunicator::Transfer final : public Request {
public:
  Transfer(NcclRulesCommunicator &owner, bool receive, int peer, int tag, int64_t n, int64_t index)
      : owner_(owner), receive_(receive), peer_(peer), tag_(tag), n_(n), index_(index) {
    header_ = {static_cast<float>(tag), static_cast<float>(n / kExact), static_cast<float>(n % kExact),
               static_cast<float>(index % kExact)};
    ++owner_.in_flight_;
  }
  ~Transfer() override {
    if (!done_)
      --owner_.in_flight_;
  }
  bool test() override {
    if (done_)
      return true;
    if (!header_request->test())
      return false;
    check_header();
    if (!data_request->test())
      return false;
    finish();
    return true;
  }
  void wait(Communicator &inner) {
    if (done_)
      return;
    inner.wait(*header_request);
    check_header();
    inner.wait(*data_request);
    finish();
  }

  std::array<float, 4> header_;
  std::unique_ptr<Request> header_request, data_request;

private:
  // A receive's header says what the peer sent as this channel's message: it must be the
  // message this receive was posted for.
  void check_header() {
    if (!receive_ || checked_)
      return;
    checked_ = true;
    const auto tag = static_cast<int64_t>(header_[0]);
    const int64_t n = static_cast<int64_t>(header_[1]) * kExact + static_cast<int64_t>(header_[2]);
    if (tag == tag_ && n == n_)
      return;
    throw Error(std::string(kRule) + owner_.axis_ + " rank " + std::to_string(owner_.rank()) + "'s receive #" +
                std::to_string(index_) + " from rank " + std::to_string(peer_) + " was posted for tag " +
                std::to_string(tag_) + ", " + std::to_string(n_) + " floats, but that rank's send #" +
                std::to_string(index_) + " to it is tag " + std::to_string(tag) + ", " + std::to_string(n) +
                " floats: NCCL has no tags, so on a channel between two ranks the i-th send must be the i-th "
                "receive");
  }
  void finish() {
    done_ = true;
    --owner_.in_flight_;
  }

  NcclRulesCommunicator &owner_;
  const bool receive_;
  const int peer_, tag_;
  const int64_t n_, index_;
  bool checked_ = false, done_ = false;
};

NcclRulesCommunicator::NcclRulesCommunicator(std::unique_ptr<Communicator> inner, std::string axis, NcclRules rules)
    : inner_(std::move(inner)), axis_(std::move(axis)), rules_(rules) {
  if (rules_ == NcclRules::Off)
    throw Error("NcclRulesCommunicator over the " + axis_ + " axis with the rules off");
  Communicator::set_timeout(inner_->timeout());
}

void NcclRulesCommunicator::set_timeout(double seconds) {
  Communicator::set_timeout(seconds);
  inner_->set_timeout(seconds);
}

void NcclRulesCommunicator::check_collective(const char *operation, int64_t n, int root) {
  const int64_t index = collectives_++;
  // This rank's call as every rank compares it: operation, count, root, its index here.
  const std::array<double, 4> own = {double(operation_index(operation)), double(n), double(root), double(index)};
  if (in_flight_ > 0)
    throw Error(std::string(kRule) + axis_ + " rank " + std::to_string(rank()) + " calls " +
                describe_call(own[0], own[1], own[2]) + " (its collective #" +
                std::to_string(index) + ") with " + std::to_string(in_flight_) +
                " point-to-point transfers of the same communicator in flight: NCCL runs a communicator's "
                "operations one after another, so they must complete first");
  // Each rank writes its call into its own slot; the sum is every rank's.
  constexpr int64_t kFields = std::tuple_size_v<decltype(own)>;
  std::vector<double> calls(static_cast<size_t>(kFields * size()), 0.0);
  std::copy(own.begin(), own.end(), calls.begin() + kFields * rank());
  inner_->all_reduce_sum(calls.data(), static_cast<int64_t>(calls.size()));
  for (int r = 0; r < size(); ++r) {
    const double *theirs = calls.data() + kFields * r;
    if (std::equal(own.begin(), own.end(), theirs))
      continue;
    throw Error(std::string(kRule) + axis_ + " rank " + std::to_string(rank()) + "'s collective #" +
                std::to_string(index) + " is " + describe_call(own[0], own[1], own[2]) + ", rank " +
                std::to_string(r) + "'s #" + std::to_string(static_cast<int64_t>(theirs[3])) + " is " +
                describe_call(theirs[0], theirs[1], theirs[2]) +
                ": NCCL needs every rank of a communicator to call the same collectives in the same order");
  }
}

void NcclRulesCommunicator::all_reduce_sum(float *data, int64_t n) {
  check_collective("all_reduce_sum", n);
  inner_->all_reduce_sum(data, n);
}
void NcclRulesCommunicator::all_reduce_max(float *data, int64_t n) {
  check_collective("all_reduce_max", n);
  inner_->all_reduce_max(data, n);
}
void NcclRulesCommunicator::all_reduce_sum(double *data, int64_t n) {
  check_collective("all_reduce_sum (double)", n);
  inner_->all_reduce_sum(data, n);
}
void NcclRulesCommunicator::all_gather(float *out, const float *in, int64_t n) {
  check_collective("all_gather", n);
  inner_->all_gather(out, in, n);
}
void NcclRulesCommunicator::reduce_scatter_sum(float *out, const float *in, int64_t n) {
  check_collective("reduce_scatter_sum", n);
  inner_->reduce_scatter_sum(out, in, n);
}
void NcclRulesCommunicator::broadcast(float *data, int64_t n, int root) {
  check_collective("broadcast", n, root);
  inner_->broadcast(data, n, root);
}
void NcclRulesCommunicator::barrier() {
  check_collective("barrier", -1);
  inner_->barrier();
}
std::unique_ptr<Request> NcclRulesCommunicator::iall_reduce_sum(float *data, int64_t n) {
  check_collective("iall_reduce_sum", n);
  return inner_->iall_reduce_sum(data, n);
}
std::unique_ptr<Request> NcclRulesCommunicator::ireduce_scatter_sum(float *out, const float *in, int64_t n) {
  check_collective("ireduce_scatter_sum", n);
  return inner_->ireduce_scatter_sum(out, in, n);
}
std::unique_ptr<Request> NcclRulesCommunicator::iall_gather(float *out, const float *in, int64_t n) {
  check_collective("iall_gather", n);
  return inner_->iall_gather(out, in, n);
}
void NcclRulesCommunicator::all_reduce_sum_bf16(uint16_t *data, int64_t n) {
  check_collective("all_reduce_sum_bf16", n);
  inner_->all_reduce_sum_bf16(data, n);
}
std::unique_ptr<Request> NcclRulesCommunicator::iall_reduce_sum_bf16(uint16_t *data, int64_t n) {
  check_collective("iall_reduce_sum_bf16", n);
  return inner_->iall_reduce_sum_bf16(data, n);
}
void NcclRulesCommunicator::all_reduce_sum(bf16_t *data, int64_t n) {
  check_collective("all_reduce_sum (bf16)", n);
  inner_->all_reduce_sum(data, n);
}
void NcclRulesCommunicator::all_reduce_sum(fp16_t *data, int64_t n) {
  check_collective("all_reduce_sum (fp16)", n);
  inner_->all_reduce_sum(data, n);
}
void NcclRulesCommunicator::all_gather(bf16_t *out, const bf16_t *in, int64_t n) {
  check_collective("all_gather (bf16)", n);
  inner_->all_gather(out, in, n);
}
void NcclRulesCommunicator::all_gather(fp16_t *out, const fp16_t *in, int64_t n) {
  check_collective("all_gather (fp16)", n);
  inner_->all_gather(out, in, n);
}
void NcclRulesCommunicator::reduce_scatter_sum(bf16_t *out, const bf16_t *in, int64_t n) {
  check_collective("reduce_scatter_sum (bf16)", n);
  inner_->reduce_scatter_sum(out, in, n);
}
void NcclRulesCommunicator::reduce_scatter_sum(fp16_t *out, const fp16_t *in, int64_t n) {
  check_collective("reduce_scatter_sum (fp16)", n);
  inner_->reduce_scatter_sum(out, in, n);
}
// The counts differ from rank to rank (the routing's): only the call is compared.
void NcclRulesCommunicator::all_to_all_v(const float *in, const int64_t *send_counts, float *out,
                                         const int64_t *recv_counts) {
  check_collective("all_to_all_v", -1);
  inner_->all_to_all_v(in, send_counts, out, recv_counts);
}
void NcclRulesCommunicator::all_to_all(const int32_t *in, int32_t *out, int64_t n) {
  check_collective("all_to_all", n);
  inner_->all_to_all(in, out, n);
}

// The MPI tag a message travels with: its own (a channel per tag) or one for every message.
std::unique_ptr<Request> NcclRulesCommunicator::isend(const float *data, int64_t n, int peer, int tag) {
  const int channel = rules_ == NcclRules::OneChannel ? p2p_tag::kNcclRulesChannel : tag;
  auto t = std::make_unique<Transfer>(*this, false, peer, tag, n, sent_[{peer, channel}]++);
  t->header_request = inner_->isend(t->header_.data(), 4, peer, channel);
  t->data_request = inner_->isend(data, n, peer, channel);
  return t;
}

std::unique_ptr<Request> NcclRulesCommunicator::irecv(float *data, int64_t n, int peer, int tag) {
  const int channel = rules_ == NcclRules::OneChannel ? p2p_tag::kNcclRulesChannel : tag;
  auto t = std::make_unique<Transfer>(*this, true, peer, tag, n, received_[{peer, channel}]++);
  t->header_request = inner_->irecv(t->header_.data(), 4, peer, channel);
  t->data_request = inner_->irecv(data, n, peer, channel);
  return t;
}

void NcclRulesCommunicator::wait(Request &request) {
  if (auto *t = dynamic_cast<Transfer *>(&request))
    return t->wait(*inner_);
  inner_->wait(request); // an overlapped collective's
}

} // namespace megart
