// The NCCL table (runtime/nccl.h): the emulated NCCL's collectives, groups of sends and
// receives, capture and replay, abort propagation and the fault wrapper; the real
// table's loading failures. Ranks are threads over one emulated runtime.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cgrt/cgrt_fault.h"
#include "runtime/nccl.h"
#include "runtime/runtime_internal.h"
#include "tests/common/test_util.h"

namespace {

thread_local bool t_released;  // the body destroyed or aborted its communicator itself

class NcclEmu : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = cgrt_test::make_runtime(0, CGRT_DRIVER_EMULATED);
    ASSERT_NE(rt_, nullptr);
    nccl_ = cgrt__nccl_emulated();
  }
  void TearDown() override { cgrt_runtime_destroy(rt_); }

  // Runs body(rank, comm) on n threads, each with its own communicator of one clique
  // (initialized without blocking, polled to ncclSuccess), destroyed afterwards.
  void ranks(int n, const std::function<void(int, ncclComm_t)> &body, const cgrt__nccl *t = nullptr) {
    if (!t) t = nccl_;
    ncclUniqueId id;
    ASSERT_EQ(t->ncclGetUniqueId(&id), ncclSuccess);
    std::vector<std::thread> th;
    for (int r = 0; r < n; r++)
      th.emplace_back([&, r] {
        ASSERT_EQ(rt_->drv->cuCtxSetCurrent(rt_->ctx), CUDA_SUCCESS);
        cgrt__nccl_config cfg{sizeof cfg, CGRT__NCCL_CONFIG_MAGIC, CGRT__NCCL_CONFIG_VERSION, 0,
                              CGRT__NCCL_UNDEF_INT, CGRT__NCCL_UNDEF_INT, CGRT__NCCL_UNDEF_INT, nullptr,
                              CGRT__NCCL_UNDEF_INT};
        ncclComm_t c = nullptr;
        ASSERT_EQ(t->ncclCommInitRankConfig(&c, n, id, r, &cfg), ncclSuccess);
        ncclResult_t st = ncclInProgress;
        while (st == ncclInProgress) ASSERT_EQ(t->ncclCommGetAsyncError(c, &st), ncclSuccess);
        ASSERT_EQ(st, ncclSuccess);
        t_released = false;
        body(r, c);
        if (!t_released) t->ncclCommDestroy(c);
      });
    for (auto &x : th) x.join();
  }
  CUdeviceptr alloc(size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(rt_->drv->cuMemAlloc(&p, bytes), CUDA_SUCCESS);
    return p;
  }

  cgrt_runtime *rt_ = nullptr;
  const cgrt__nccl *nccl_ = nullptr;
};

TEST_F(NcclEmu, AllGatherReduceScatterAllReduceOn2To4Ranks) {
  for (int n = 2; n <= 4; n++) {
    SCOPED_TRACE(n);
    ranks(n, [&](int r, ncclComm_t c) {
      const size_t k = 5;
      std::vector<float> mine(k * n), got(k * n);
      for (size_t i = 0; i < mine.size(); i++) mine[i] = 100.f * r + (float)i;
      float *send = (float *)(uintptr_t)alloc(mine.size() * 4), *recv = (float *)(uintptr_t)alloc(got.size() * 4);
      memcpy(send, mine.data(), mine.size() * 4);
      ASSERT_EQ(nccl_->ncclAllGather(send, recv, k, ncclFloat32, c, nullptr), ncclSuccess);
      for (int p = 0; p < n; p++)
        for (size_t i = 0; i < k; i++) EXPECT_EQ(recv[p * k + i], 100.f * p + (float)i);
      ASSERT_EQ(nccl_->ncclReduceScatter(send, recv, k, ncclFloat32, ncclSum, c, nullptr), ncclSuccess);
      for (size_t i = 0; i < k; i++) {
        float want = 0;
        for (int p = 0; p < n; p++) want += 100.f * p + (float)(r * k + i);
        EXPECT_EQ(recv[i], want);
      }
      int32_t *flag = (int32_t *)(uintptr_t)alloc(4);
      *flag = r == 1 ? 0 : 1;
      ASSERT_EQ(nccl_->ncclAllReduce(flag, flag, 1, ncclInt32, ncclMin, c, nullptr), ncclSuccess);
      EXPECT_EQ(*flag, 0);
      ncclResult_t st;
      ASSERT_EQ(nccl_->ncclCommGetAsyncError(c, &st), ncclSuccess);
      EXPECT_EQ(st, ncclSuccess);
      rt_->drv->cuMemFree((CUdeviceptr)(uintptr_t)send);
      rt_->drv->cuMemFree((CUdeviceptr)(uintptr_t)recv);
      rt_->drv->cuMemFree((CUdeviceptr)(uintptr_t)flag);
    });
  }
}

TEST_F(NcclEmu, GroupedSendRecvIsAnAllToAll) {
  const int n = 3;
  ranks(n, [&](int r, ncclComm_t c) {
    std::vector<int32_t> v(n);
    int32_t *send = (int32_t *)(uintptr_t)alloc(n * 4), *recv = (int32_t *)(uintptr_t)alloc(n * 4);
    for (int p = 0; p < n; p++) send[p] = 10 * r + p;  // what r sends to p
    ASSERT_EQ(nccl_->ncclGroupStart(), ncclSuccess);
    for (int p = 0; p < n; p++) {
      ASSERT_EQ(nccl_->ncclSend(send + p, 1, ncclInt32, p, c, nullptr), ncclSuccess);
      ASSERT_EQ(nccl_->ncclRecv(recv + p, 1, ncclInt32, p, c, nullptr), ncclSuccess);
    }
    ASSERT_EQ(nccl_->ncclGroupEnd(), ncclSuccess);
    for (int p = 0; p < n; p++) EXPECT_EQ(recv[p], 10 * p + r);
    rt_->drv->cuMemFree((CUdeviceptr)(uintptr_t)send);
    rt_->drv->cuMemFree((CUdeviceptr)(uintptr_t)recv);
  });
}

TEST_F(NcclEmu, CapturedCollectiveRunsAtEachReplay) {
  const int n = 2;
  ranks(n, [&](int r, ncclComm_t c) {
    const cgrt__driver *d = rt_->drv;
    CUstream s;
    ASSERT_EQ(d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    float *send = (float *)(uintptr_t)alloc(8), *recv = (float *)(uintptr_t)alloc(16);
    ASSERT_EQ(d->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
    ASSERT_EQ(nccl_->ncclAllGather(send, recv, 2, ncclFloat32, c, s), ncclSuccess);
    CUgraph g = nullptr;
    ASSERT_EQ(d->cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    CUgraphExec e = nullptr;
    ASSERT_EQ(d->cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    for (int it = 0; it < 3; it++) {
      send[0] = (float)(r + 10 * it);
      send[1] = -send[0];
      ASSERT_EQ(d->cuGraphLaunch(e, s), CUDA_SUCCESS);
      ASSERT_EQ(d->cuStreamSynchronize(s), CUDA_SUCCESS);
      for (int p = 0; p < n; p++) {
        EXPECT_EQ(recv[2 * p], (float)(p + 10 * it));
        EXPECT_EQ(recv[2 * p + 1], -(float)(p + 10 * it));
      }
    }
    d->cuGraphExecDestroy(e);
    d->cuGraphDestroy(g);
    d->cuStreamDestroy(s);
    d->cuMemFree((CUdeviceptr)(uintptr_t)send);
    d->cuMemFree((CUdeviceptr)(uintptr_t)recv);
  });
}

// A rank that aborts wakes the ranks waiting for it: their operation is dropped and
// their communicator reports ncclRemoteError; nobody hangs.
TEST_F(NcclEmu, AbortReleasesTheOtherRanks) {
  const int n = 3;
  ranks(n, [&](int r, ncclComm_t c) {
    float *buf = (float *)(uintptr_t)alloc(4 * n);
    if (r == 0) {
      // Let the others reach the meeting point first, then abort instead of joining.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      t_released = true;
      ASSERT_EQ(nccl_->ncclCommAbort(c), ncclSuccess);
      rt_->drv->cuMemFree((CUdeviceptr)(uintptr_t)buf);
      return;
    }
    ASSERT_EQ(nccl_->ncclAllGather(buf, buf, 1, ncclFloat32, c, nullptr), ncclSuccess);
    ncclResult_t st;
    ASSERT_EQ(nccl_->ncclCommGetAsyncError(c, &st), ncclSuccess);
    EXPECT_EQ(st, ncclRemoteError);
    rt_->drv->cuMemFree((CUdeviceptr)(uintptr_t)buf);
  });
}

TEST_F(NcclEmu, MismatchedOperationsFailEveryRank) {
  ranks(2, [&](int r, ncclComm_t c) {
    float *buf = (float *)(uintptr_t)alloc(64);
    ASSERT_EQ(nccl_->ncclAllGather(buf, buf + 4, r == 0 ? 1 : 2, ncclFloat32, c, nullptr), ncclSuccess);
    ncclResult_t st;
    ASSERT_EQ(nccl_->ncclCommGetAsyncError(c, &st), ncclSuccess);
    EXPECT_NE(st, ncclSuccess);
    rt_->drv->cuMemFree((CUdeviceptr)(uintptr_t)buf);
  });
}

TEST_F(NcclEmu, FaultWrapperFailsTheChosenCall) {
  const cgrt__nccl *f = cgrt__nccl_fault(nccl_);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f, cgrt__nccl_fault(nccl_));
  EXPECT_STREQ(f->name, "fault(emulated)");
  cgrt_fault_plan plan{sizeof plan, 1, "ncclGetUniqueId", 0, 0};
  CGRT_ASSERT_OK(cgrt_fault_set(&plan));
  ncclUniqueId id;
  EXPECT_EQ(f->ncclGetUniqueId(&id), ncclInternalError);
  EXPECT_EQ(f->ncclGetUniqueId(&id), ncclSuccess);
  EXPECT_EQ(cgrt_fault_calls(), 2u);
  EXPECT_EQ(cgrt_fault_injected(), 1u);
  EXPECT_STREQ(cgrt_fault_last_symbol(), "ncclGetUniqueId");
  plan.result = ncclRemoteError;
  CGRT_ASSERT_OK(cgrt_fault_set(&plan));
  EXPECT_EQ(f->ncclGetUniqueId(&id), ncclRemoteError);
  int v = 0;
  EXPECT_EQ(f->ncclGetVersion(&v), ncclSuccess);  // reports: never counted
  EXPECT_EQ(cgrt_fault_calls(), 1u);
  CGRT_ASSERT_OK(cgrt_fault_set(nullptr));
}

TEST(NcclReal, MissingLibraryGivesAMessage) {
  char msg[1024] = "";
  EXPECT_EQ(cgrt__nccl_real("/nonexistent/libnccl.so.2", msg, sizeof msg), nullptr);
  EXPECT_NE(std::string(msg).find("dlopen(\"/nonexistent/libnccl.so.2\")"), std::string::npos) << msg;
  // A library that is not NCCL: libc has none of the entry points.
  EXPECT_EQ(cgrt__nccl_real("libc.so.6", msg, sizeof msg), nullptr);
  EXPECT_NE(std::string(msg).find("has no ncclGetVersion"), std::string::npos) << msg;
  // The default search: NCCL where installed (then 2.17 or newer), else a message
  // naming the places searched.
  const cgrt__nccl *t = cgrt__nccl_real(nullptr, msg, sizeof msg);
  if (t) {
    EXPECT_GE(t->version, CGRT__NCCL_MIN_VERSION);
    EXPECT_STREQ(t->name, "nccl");
  } else {
    EXPECT_NE(std::string(msg).find("nvidia/nccl/lib"), std::string::npos) << msg;
  }
}

TEST(NcclReal, ResultNames) {
  EXPECT_STREQ(cgrt__nccl_result_name(ncclRemoteError), "ncclRemoteError");
  EXPECT_STREQ(cgrt__nccl_result_name((ncclResult_t)42), "ncclResult(unknown)");
}

}  // namespace
