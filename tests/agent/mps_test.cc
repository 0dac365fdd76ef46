// MPS control daemons with a fake nvidia-cuda-mps-control (tests/agent/fake_mps_control.sh) that
// records its arguments, environment and stdin commands.
#include "agent/mps.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/agent/fake_node.h"
#include "tests/support/test_paths.h"

namespace tessera::agent {
namespace {

using testing_support::TempPath;

constexpr const char* kGpu = "GPU-a100-0";
constexpr const char* kMig = "MIG-4f1c0b7e-1d2a-5b3c-8e9f-0a1b2c3d4e5f";

class Mps : public ::testing::Test {
 protected:
  void SetUp() override {
    record_ = TempPath("mps.log");
    std::remove(record_.c_str());
    setenv("TESSERA_FAKE_MPS_RECORD", record_.c_str(), 1);
    unsetenv("TESSERA_FAKE_MPS_FAIL");
    options_.control = test::SourceDir() + "/tests/agent/fake_mps_control.sh";
    options_.root = TempPath("mps");
  }
  void TearDown() override {
    MpsManager m(options_);
    (void)m.Reconcile({});
    unsetenv("TESSERA_FAKE_MPS_RECORD");
    unsetenv("TESSERA_FAKE_MPS_FAIL");
  }
  std::string Record() const {
    std::ifstream in(record_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string Env(const std::string& uuid) const {
    return " | CUDA_VISIBLE_DEVICES=" + uuid + " | CUDA_MPS_PIPE_DIRECTORY=" + options_.root + "/" +
           uuid + "/pipe | CUDA_MPS_LOG_DIRECTORY=" + options_.root + "/" + uuid + "/log\n";
  }

  std::string record_;
  MpsOptions options_;
};

TEST_F(Mps, StartsWithLimitsReusesAndStops) {
  MpsManager m(options_);
  ASSERT_TRUE(m.Start({kGpu, 2, 25, 4096}).ok());
  EXPECT_TRUE(m.Running(kGpu));
  struct stat st {};
  EXPECT_EQ(::stat((options_.root + "/" + kGpu + "/log").c_str(), &st), 0);
  EXPECT_EQ(Record(), "run -d" + Env(kGpu) + "run " + Env(kGpu) +
                          "stdin set_default_active_thread_percentage 25\n"
                          "stdin set_default_device_pinned_mem_limit 0 4096M\n");

  ASSERT_TRUE(m.Start({kGpu, 3, 25, 4096}).ok());  // running: reused, nothing run
  MpsManager restarted(options_);
  ASSERT_TRUE(restarted.Start({kGpu, 3, 25, 4096}).ok());
  EXPECT_EQ(Record().size(), (Record().find("4096M\n") + 6));

  ASSERT_TRUE(m.Stop(kGpu).ok());
  EXPECT_FALSE(m.Running(kGpu));
  EXPECT_NE(Record().find("run " + Env(kGpu) + "stdin quit\n"), std::string::npos);
  const size_t size = Record().size();
  ASSERT_TRUE(m.Stop(kGpu).ok());  // not running: no-op
  EXPECT_EQ(Record().size(), size);
}

TEST_F(Mps, NoLimitsSendsNoCommands) {
  MpsManager m(options_);
  ASSERT_TRUE(m.Start({kMig, 1, 0, 0}).ok());
  EXPECT_EQ(Record(), "run -d" + Env(kMig));
}

TEST_F(Mps, ReconcileStartsAndStopsByClients) {
  MpsManager m(options_);
  ASSERT_TRUE(m.Reconcile({{kGpu, 1, 50, 0}, {kMig, 2, 0, 1024}}).ok());
  EXPECT_TRUE(m.Running(kGpu));
  EXPECT_TRUE(m.Running(kMig));
  ASSERT_TRUE(m.Reconcile({{kGpu, 0, 50, 0}, {kMig, 2, 0, 1024}}).ok());
  EXPECT_FALSE(m.Running(kGpu));
  EXPECT_TRUE(m.Running(kMig));
  MpsManager restarted(options_);
  ASSERT_TRUE(restarted.Reconcile({}).ok());  // no device listed: every daemon under root stops
  EXPECT_FALSE(m.Running(kMig));
  const std::string rec = Record();
  size_t runs = 0;
  for (size_t p = rec.find("run -d"); p != std::string::npos; p = rec.find("run -d", p + 1)) ++runs;
  EXPECT_EQ(runs, 2u);
}

TEST_F(Mps, Errors) {
  MpsManager m(options_);
  EXPECT_EQ(m.Start({"../etc", 1, 0, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.Start({"GPU-x/..", 1, 0, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.Start({kGpu, 1, 101, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Record(), "");

  setenv("TESSERA_FAKE_MPS_FAIL", "set_default_active_thread_percentage", 1);
  Status st = m.Start({kGpu, 1, 30, 0});
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_EQ(st.message(),
            options_.control + " (CUDA_VISIBLE_DEVICES=" + kGpu + ") failed: exit status 1");

  MpsOptions missing = options_;
  missing.control = options_.root + "/no-such-control";
  st = MpsManager(missing).Start({kMig, 1, 0, 0});
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("exit status 127 (not found?)"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tessera::agent
