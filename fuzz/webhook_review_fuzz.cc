// Fuzz target for ReviewPod (the pod webhook's AdmissionReview handling, src/kube/webhook.h).
//
// Properties: never crashes or throws. Input that is not JSON is skipped (the server answers 400
// before ReviewPod). A rejection is InvalidArgument with a message. An accepted review answers
// with the request's uid and allowed true; its patch, when present, is base64 JSON Patch that
// applies to the request's object, and the patched pod reviewed again gets no patch.
#include <openssl/evp.h>

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kube/webhook.h"

#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using nlohmann::json;
  using tessera::fuzz::Fail;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const json review = json::parse(input, nullptr, false);
  if (review.is_discarded()) return 0;
  tessera::kube::WebhookConfig cfg;
  cfg.scheduler_name = "tessera";
  const auto reply = tessera::kube::ReviewPod(review, cfg);
  if (!reply.ok()) {
    if (reply.status().code() != tessera::StatusCode::kInvalidArgument)
      Fail("rejection is not InvalidArgument", input);
    if (reply.status().message().empty()) Fail("rejection without a message", input);
    return 0;
  }
  const json& r = reply->at("response");
  if (r.value("allowed", false) != true) Fail("review not allowed", input);
  if (r.at("uid") != review.at("request").at("uid")) Fail("uid not echoed", input);
  if (!r.contains("patch")) return 0;
  const std::string b64 = r.at("patch").get<std::string>();
  std::string text(b64.size(), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(text.data()),
                                reinterpret_cast<const unsigned char*>(b64.data()),
                                static_cast<int>(b64.size()));
  if (n < 0) Fail("patch is not base64", input);
  text.resize(static_cast<size_t>(n));
  while (!text.empty() && text.back() == '\0') text.pop_back();
  const json patch = json::parse(text, nullptr, false);
  if (!patch.is_array()) Fail("patch is not a JSON array", input);
  json pod;
  try {
    pod = review.at("request").at("object").patch(patch);
  } catch (const std::exception&) {
    Fail("patch does not apply to the pod", input);
  }
  json again = review;
  again["request"]["object"] = pod;
  const auto second = tessera::kube::ReviewPod(again, cfg);
  if (!second.ok()) Fail("the patched pod is rejected", input);
  if (second->at("response").contains("patch")) Fail("a patched pod is patched again", input);
  return 0;
}
