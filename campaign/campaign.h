// A campaign: one shard of the chunks of a CampaignSpec (campaign/campaign_plan.h), run by a supervisor over
// one isolated worker per GPU (or per CPU worker), with its state in a directory:
//
//   DIR/campaign.json   the definition (a rerun must match its identity)
//   DIR/journal.jsonl   every finished chunk (campaign/campaign_journal.h): a rerun skips them
//   DIR/found/          fixtures of findings, and of the cases that crashed a worker
//   DIR/workers/<n>/    each worker's in-flight case descriptor
//
// Workers ask the supervisor for chunks one at a time. A worker that crashes, hangs past the case limit or
// exits on a sticky CUDA error is replaced; the chunk it died in is recorded as a crash whose case is the
// worker's in-flight descriptor (saved as a fixture), with the cases judged before it counted.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kernel.h"
#include "properties/property.h"
#include "campaign/campaign_plan.h"
#include "search/fuzz_report.h"

namespace flashcheck {

// Where one worker runs: its label in reports and the environment it starts with.
struct WorkerSlot {
  std::string device;
  std::vector<std::pair<std::string, std::string>> env;
  std::int64_t memory_limit = 0;  // bytes of address space (WorkerOptions::memory_limit); 0: none
};

// `gpus` is "all" or a list of indices ("0,2") into the devices this process sees; each slot pins its
// worker with CUDA_VISIBLE_DEVICES to one of them (the entries of this process's CUDA_VISIBLE_DEVICES when
// it has one, as SLURM's --gpus-per-task sets it). Nothing, with `error` set, when a GPU is missing.
std::vector<WorkerSlot> gpu_slots(const std::string& gpus, std::string& error);
std::vector<WorkerSlot> cpu_slots(int workers);
// Each slot `per_slot` times, labelled apart: several workers sharing one GPU. One worker keeps a GPU busy with
// a kernel called from C++; a kernel behind the Python bridge spends most of a case on the host (interpreter,
// compiled-graph guards, mask construction), so a few workers per GPU raise the rate.
std::vector<WorkerSlot> shared_slots(const std::vector<WorkerSlot>& slots, int per_slot);

struct CampaignProgress {
  std::int64_t cases = 0;     // judged so far, earlier sessions included
  std::int64_t failures = 0;  // failing chunks (findings before de-duplication) and crashes
  std::int64_t crashes = 0;
  int chunks_done = 0;
  double seconds = 0;       // this session
  double cases_per_second = 0;  // this session
  int workers = 0;
};

struct CampaignRunOptions {
  std::string dir;
  std::vector<WorkerSlot> slots;  // one worker each
  std::function<void(const CampaignProgress&)> on_progress;  // about once a second
};

struct CampaignOutcome {
  std::vector<FuzzReport> totals;  // per unit, every session of this directory
  int chunks_before = 0;           // found done in the journal
  int chunks_run = 0;              // this session
  int restarts = 0;                // workers replaced after a crash, hang or sticky error
  int torn_lines = 0;              // journal lines cut short by an earlier kill (ignored)
  bool complete = false;           // every planned chunk done, or the time budget spent
  std::vector<std::string> retired;  // workers given up on (they died three times outside any chunk)
};

// A directory that holds another campaign, or a campaign already running in it.
struct CampaignError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runs (or resumes) the campaign; `units` are the kernel and property of each spec.units entry.
CampaignOutcome run_campaign(const CampaignSpec& spec, const std::vector<std::pair<Kernel*, const Property*>>& units,
                             const CampaignRunOptions& o);

}  // namespace flashcheck
