# The moment each tutorial's picture shows, for tutorials/screenshot.sh and scripts/web gallery:
#   source tutorials/views.sh; tutorial_view NN   sets folder, view (dpscope-view's arguments,
#   trace paths relative to the tutorial's trace directory), link (dpscope launch's emulated
#   link), clock and ranks; returns 1 for a tutorial without one (16 needs a GPU to trace; 19 and
#   21 are scripts).
#
# Which run each tutorial shows, and with what to compare it (the viewer aligns them on iterations);
# the tutorials whose README runs them on an emulated link get the same link here. The timing
# lessons are drawn on the cluster clock (clock=cluster: docs/cluster-clock.md), so the picture
# shows the cluster they teach about, not this machine's scheduler.
tutorial_view() {
  link=()
  clock=measured
  ranks=2
  case "$1" in
    01) folder=01_collectives;         view=(primer/run.sqlite --iteration 0 --step 7)
        link=(--link-gbps 2 --link-latency-us 500) ;;
    02) folder=02_naive_dp;            view=(after-backward/run.sqlite --compare hooks/run.sqlite --iteration 4)
        link=(--link-gbps 1 --link-latency-us 50); clock=cluster ;;
    03) folder=03_toy_ddp;            view=(run.sqlite) ;;
    04) folder=04_bucketing;          view=(cap-1mb/run.sqlite --compare cap-25mb/run.sqlite)
        link=(--link-gbps 2 --link-latency-us 50); clock=cluster ;;
    05) folder=05_bucket_rebuild;     view=(by-size-guess/run.sqlite --compare gradient-copy/run.sqlite)
        link=(--link-gbps 2 --link-latency-us 50); clock=cluster ;;
    06) folder=06_unused_parameters;  view=(run.sqlite) ;;
    07) folder=07_no_sync;            view=(no-sync/run.sqlite --compare sync-every-micro-step/run.sqlite)
        link=(--link-gbps 1 --link-latency-us 50); clock=cluster ;;
    08) folder=08_comm_hooks;         view=(allreduce/run.sqlite --compare powersgd/run.sqlite) ;;
    09) folder=09_scaling;             view=(run.sqlite --iteration 4 --fold 1,2,3,4,5,6)
        link=(--link-gbps 0.2 --link-latency-us 50); clock=cluster; ranks=8 ;;
    10) folder=10_fsdp_basics;        view=(per-unit/run.sqlite --compare bucketed/run.sqlite) ;;
    11) folder=11_fsdp_nesting_prefetch; view=(root-only/run.sqlite --compare nested/run.sqlite)
        link=(--link-gbps 4 --link-latency-us 50); clock=cluster ;;
    12) folder=12_zero_stages;        view=(ddp/run.sqlite --compare full-shard/run.sqlite --iteration 2)
        link=(--link-gbps 4 --link-latency-us 50); clock=cluster ;;
    13) folder=13_zero1;               view=(ddp/run.sqlite --compare zero1/run.sqlite --iteration 2)
        link=(--link-gbps 4 --link-latency-us 50); clock=cluster ;;
    14) folder=14_mixed_precision_offload; view=(fp32/run.sqlite --compare bf16/run.sqlite --iteration 4)
        link=(--link-gbps 4 --link-latency-us 50) ;;
    15) folder=15_real_training;      view=(ddp/run.sqlite --compare fsdp/run.sqlite --iteration 150) ;;
    16) folder=16_gpus;               view=(ddp/run.sqlite --compare fsdp/run.sqlite) ;;
    17) folder=17_stragglers;         view=(slow-40ms/run.sqlite --iteration 4)
        link=(--link-gbps 1 --link-latency-us 50); clock=cluster ;;
    18) folder=18_whatif;             view=(cap-1mb/run.sqlite --whatif-cap-mb 25 --whatif-first-bucket-mb 25 --iteration 6 --fold 1)
        link=(--link-gbps 4 --link-latency-us 50); clock=cluster ;;
    20) folder=20_fsdp1_vs_fsdp2;      view=(fsdp1/run.sqlite --compare fsdp2/run.sqlite --iteration 1); ranks=4 ;;
    *) return 1 ;;
  esac
}
