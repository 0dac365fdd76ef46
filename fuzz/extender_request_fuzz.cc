// Fuzz target for the extender's request handling (src/kube/extender.h): the first byte picks the
// verb (filter, prioritize, bind, preempt), the rest is the request body as sent on the wire.
//
// Properties: never crashes or throws. ValidateExtenderRequest is deterministic and, on a
// rejection, gives InvalidArgument with a message. A body it accepts is handled by the
// Extender without an exception text in the reply, with the reply shape of the protocol
// (filter: an object with an Error string; prioritize: an array of Host/Score in 0..10; bind: an
// object with an Error string; preempt: an object with NodeNameToMetaVictims). A connected
// extender (request nodes not trusted) never learns a node from a request, and bind never
// reaches the API for a pod name or namespace that is not a DNS-1123 name.
#include <cstdint>
#include <string>
#include <string_view>

#include "kube/client.h"
#include "kube/extender.h"

#include "fuzz/fuzz_util.h"

namespace {

using tessera::Status;
using tessera::StatusCode;
using tessera::fuzz::Fail;
using tessera::kube::Extender;
using tessera::kube::ExtenderOptions;
using tessera::kube::Json;

const Json& Node() {
  static const Json kNode = Json::parse(R"({
    "metadata": {"name": "gpu-a", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                                             "nvidia.com/gpu.count": "2"}},
    "status": {"capacity": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "2"},
               "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "2"}}})");
  return kNode;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const char* const kVerbs[] = {"filter", "prioritize", "bind", "preempt"};
  const std::string verb = kVerbs[data[0] % 4];
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  const Json body = Json::parse(input, nullptr, false);
  if (body.is_discarded()) return 0;

  const Status a = tessera::kube::ValidateExtenderRequest(verb, body);
  const Status b = tessera::kube::ValidateExtenderRequest(verb, body);
  if (a.ToString() != b.ToString()) Fail("validation is not deterministic", input);
  if (!a.ok()) {
    if (a.code() != StatusCode::kInvalidArgument) Fail("rejection is not InvalidArgument", input);
    if (a.message().empty()) Fail("rejection without a message", input);
    return 0;
  }

  ExtenderOptions opts;
  opts.trust_request_nodes = false;
  bool looked_up = false;
  opts.lookup_pod = [&](const std::string& ns, const std::string& name) -> tessera::Result<Json> {
    looked_up = true;
    if (!tessera::kube::ValidateDns1123Label("namespace", ns).ok() ||
        !tessera::kube::ValidateDns1123Subdomain("pod", name).ok())
      Fail("bind looked up a pod whose name is not a DNS-1123 name", input);
    return tessera::NotFound("pod " + ns + "/" + name + " not found");
  };
  Extender ext(opts);
  if (!ext.UpsertNode(Node()).ok()) Fail("fixture node rejected", input);
  const size_t nodes = ext.stats().nodes;
  auto no_bind = [&](const std::string&, const std::string&, const std::string&, const std::string&,
                     const std::map<std::string, std::string>&) {
    Fail("bind reached the API for a pod that was not found", input);
    return Status::Ok();
  };
  Json out;
  if (verb == "filter") out = ext.Filter(body);
  if (verb == "prioritize") out = ext.Prioritize(body);
  if (verb == "bind") out = ext.Bind(body, no_bind);
  if (verb == "preempt") out = ext.Preempt(body);
  if (ext.stats().nodes != nodes) Fail("a request changed the node view", input);
  const std::string text = out.dump();
  // Filter echoes the kept nodes of the request, so the text counts only if the request lacks it.
  if (text.find("json.exception") != std::string::npos &&
      input.find("json.exception") == std::string_view::npos)
    Fail("an exception text reached the reply", input);
  if (verb == "filter" || verb == "bind") {
    if (!out.is_object() || !out.contains("Error") || !out["Error"].is_string())
      Fail("reply without an Error string", input);
  }
  if (verb == "prioritize") {
    if (!out.is_array()) Fail("prioritize reply is not an array", input);
    for (const Json& h : out)
      if (!h.is_object() || !h["Score"].is_number_integer() || h["Score"].get<int64_t>() < 0 ||
          h["Score"].get<int64_t>() > 10)
        Fail("prioritize score outside 0..10", input);
  }
  if (verb == "preempt" && (!out.is_object() || !out.contains("NodeNameToMetaVictims")))
    Fail("preempt reply without NodeNameToMetaVictims", input);
  if (verb == "bind" && !looked_up && out["Error"].get<std::string>().empty())
    Fail("bind succeeded without looking the pod up", input);
  return 0;
}
