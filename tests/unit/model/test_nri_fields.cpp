// The NRI field table (model/knobs.hpp NriField): the one relation of knob ↔ NRI
// ContainerAdjustment field, used by the adjustment (event/adjust.cpp nri_field, nri_capable,
// process_knob_field) and by settings.leave_to_others (field_knobs). These checks keep its two
// columns consistent with each other and with the knob table.
#include <catch2/catch.hpp>

#include <cstring>
#include <set>
#include <string>

#include "event/adjust.hpp"
#include "model/knobs.hpp"

using namespace nriqos;

namespace {
/// The knobs whose cgroup v2 file is `file` (field_knobs' rule for a unified.<file> name).
uint64_t v2_file_knobs(const std::string& file) {
    uint64_t bits = 0;
    for (const auto& d : knob_table())
        if (d.v2_file && file == d.v2_file) bits |= knob_bit(d.id);
    return bits;
}
}  // namespace

TEST_CASE("NRI field table: each row's columns agree", "[knobs][nri-fields]") {
    size_t n = 0;
    const NriField* t = nri_field_table(n);
    REQUIRE(n > 30);
    std::set<std::string> names;
    for (size_t i = 0; i < n; ++i) {
        const NriField& f = t[i];
        INFO(f.name);
        CHECK(names.insert(f.name).second);  // one row per name
        CHECK((f.carries & ~f.covers) == 0);  // a field covers what it carries
        CHECK((f.ptr != nullptr) == (f.value != NriValue::None));
        CHECK((f.carries != 0) == (f.value != NriValue::None));
        if (f.ptr) CHECK(std::strncmp(f.ptr, "/linux/", 7) == 0);
        // what field_knobs answers for the name is the row
        FieldKnobs fk;
        std::string err;
        REQUIRE(field_knobs(f.name, fk, err));
        CHECK(fk.knobs == f.covers);
        CHECK(fk.never_set == (f.covers == 0));
        if (f.alias_of) {
            FieldKnobs of;
            REQUIRE(field_knobs(f.alias_of, of, err));
            CHECK(of.knobs == f.covers);
        }
        // a unified.<file> row covers what any other unified.<file> name would: the knobs of that v2 file
        if (std::strncmp(f.name, "unified.", 8) == 0) {
            CHECK(f.covers == v2_file_knobs(f.name + 8));
            CHECK(std::string(f.ptr) == std::string("/linux/resources/unified/") + (f.name + 8));
        }
    }
}

TEST_CASE("NRI field table: one carrier per knob, and which knobs have one", "[knobs][nri-fields]") {
    size_t n = 0;
    const NriField* t = nri_field_table(n);
    for (const auto& d : knob_table()) {
        INFO(d.key);
        int rows = 0;
        for (size_t i = 0; i < n; ++i) rows += (t[i].carries & knob_bit(d.id)) ? 1 : 0;
        CHECK(rows <= 1);
        CHECK((nri_carrier(d.id) != nullptr) == (rows == 1));
    }
    // Written by nri-qos itself on every runtime: no NRI field carries them.
    for (KnobId id : {KnobId::CpuQosLevel, KnobId::MemoryQosLevel, KnobId::MemorySoftLimit, KnobId::BlkioThrottle, KnobId::CpuBvtWarpNs})
        CHECK(nri_carrier(id) == nullptr);
    CHECK(std::string(nri_carrier(KnobId::CpuShares)->ptr) == "/linux/resources/cpu/shares");
    CHECK(std::string(nri_carrier(KnobId::OomScoreAdj)->ptr) == "/linux/oom_score_adj");
    CHECK(nri_carrier(KnobId::PidsMax)->gate == NriGate::Nri08);
    // process knobs: the field and the NRI minor that added it (api.proto v0.10/v0.11/v0.12)
    int min = -1;
    CHECK(std::string(process_knob_field(KnobId::IoLevel, min)) == "io_priority");
    CHECK(min == 10);
    CHECK(std::string(process_knob_field(KnobId::SchedNice, min)) == "scheduler");
    CHECK(min == 11);
    CHECK(std::string(process_knob_field(KnobId::MemoryPolicyNodes, min)) == "memory_policy");
    CHECK(min == 12);
    CHECK(process_knob_field(KnobId::CpuShares, min) == nullptr);
    CHECK(min == 0);
}
