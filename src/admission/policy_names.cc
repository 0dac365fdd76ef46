// The text forms of the queue priority policies (admission.h): names and their parsers. Kept
// apart from the rest of admission so that scenario readers and their fuzz targets can use them
// alone.
#include <initializer_list>
#include <string>

#include "admission/admission.h"

namespace tessera {

const char* Name(WithinQueuePreemption p) {
  switch (p) {
    case WithinQueuePreemption::kNever:
      return "Never";
    case WithinQueuePreemption::kLowerPriority:
      return "LowerPriority";
    case WithinQueuePreemption::kLowerOrNewerEqualPriority:
      return "LowerOrNewerEqualPriority";
  }
  return "?";
}

const char* Name(ReclaimPreemption p) {
  switch (p) {
    case ReclaimPreemption::kNever:
      return "Never";
    case ReclaimPreemption::kLowerPriority:
      return "LowerPriority";
    case ReclaimPreemption::kAny:
      return "Any";
  }
  return "?";
}

const char* Name(QueueingStrategy s) {
  return s == QueueingStrategy::kStrictFifo ? "StrictFIFO" : "BestEffortFIFO";
}

namespace {

template <typename E>
Result<E> ParseEnum(const std::string& text, std::initializer_list<E> values, const char* what) {
  std::string accepted;
  for (E v : values) {
    if (text == Name(v)) return v;
    accepted += std::string(accepted.empty() ? "" : ", ") + Name(v);
  }
  return InvalidArgument(std::string(what) + ": '" + text + "' is not one of " + accepted);
}

}  // namespace

Result<WithinQueuePreemption> ParseWithinQueuePreemption(const std::string& text) {
  return ParseEnum(text,
                   {WithinQueuePreemption::kNever, WithinQueuePreemption::kLowerPriority,
                    WithinQueuePreemption::kLowerOrNewerEqualPriority},
                   "within-queue preemption");
}

Result<ReclaimPreemption> ParseReclaimPreemption(const std::string& text) {
  return ParseEnum(
      text, {ReclaimPreemption::kNever, ReclaimPreemption::kLowerPriority, ReclaimPreemption::kAny},
      "reclaim within cohort");
}

Result<QueueingStrategy> ParseQueueingStrategy(const std::string& text) {
  return ParseEnum(text, {QueueingStrategy::kBestEffortFifo, QueueingStrategy::kStrictFifo},
                   "queueing strategy");
}

}  // namespace tessera
