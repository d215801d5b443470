// libFuzzer target: the policy loader (policy.hpp parse_policy_toml). Oracle: InputError with a
// one-line message, or a Policy that (1) round-trips losslessly through the compiled-cache form
// (policy_to_json → CBOR → policy_from_json → policy_to_json), and (2) classifies a sample
// request of every kind without throwing (a gated class's fallback exists, ungated), and (3)
// whose settings.fail read_fail_mode (the pass ahead of a compile) reads the same; on any text,
// read_fail_mode returns (it runs on every text an event compiles).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "event/classify.hpp"
#include "fuzz_common.hpp"
#include "policy/policy.hpp"
#include "model/request.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    const std::optional<bool> ahead = nriqos::read_fail_mode(text);
    nriqos::Policy p;
    try {
        p = nriqos::parse_policy_toml(text, "fuzz.toml");
    } catch (const nriqos::InputError& e) {
        std::string m = e.what();
        if (m.empty() || m.find('\n') != std::string::npos) fuzz::die("error message not one line", m);
        return 0;
    }
    if (ahead != std::optional<bool>(p.fail_closed)) fuzz::die("read_fail_mode disagrees with the compiled settings.fail");
    nlohmann::json j = nriqos::policy_to_json(p);
    nriqos::Policy back;
    try {
        back = nriqos::policy_from_json(nlohmann::json::from_cbor(nlohmann::json::to_cbor(j)));
    } catch (const std::exception& e) { fuzz::die("compiled policy does not load back", e.what()); }
    if (nriqos::policy_to_json(back) != j) fuzz::die("compiled policy round trip is lossy");

    nriqos::Request r;
    r.id = "abc";
    r.sandbox_id = "abc";
    r.pod_namespace = "online-a";
    r.pod_name = "p1";
    r.container_name = "c1";
    r.labels = {{"a", "b"}, {"nri-qos.io/allow-hls", "true"}, {"koordinator.sh/qosClass", "LSE"}};
    r.annotations = {{"k", "v"}, {"qos.class", "ls"}};
    for (int sandbox = 0; sandbox < 2; ++sandbox) {
        for (auto q : {nriqos::KubeQos::Unknown, nriqos::KubeQos::BestEffort, nriqos::KubeQos::Burstable, nriqos::KubeQos::Guaranteed}) {
            r.is_sandbox = sandbox;
            nriqos::Facts f{&r, q};
            nriqos::Decision d = nriqos::classify(p, f);
            if (!d.cls) fuzz::die("classify returned no class");
            if (d.cls->gate.enabled && !d.gate_note.empty()) fuzz::die("gate fell back to a gated class");
        }
    }
    return 0;
}
