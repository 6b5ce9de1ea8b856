// What each rank holds under FSDP1 and under FSDP2, read from the two runs' traces and printed
// for tutorial 20: FSDP1's flat ranges translated back into the rows and columns they cut, FSDP2's
// dim-0 rows of each parameter, the two drawn side by side, and the padding each one adds.
// Trace-only (trace::Reader and FSDP2's chunk arithmetic); rank 0 prints, one thread.
#pragma once

#include "trace/reader.h"

namespace dpscope::tutorials {

// Per FSDP1 unit and rank: the elements [begin, end) of the padded flat parameter the rank keeps,
// as pieces of the parameters (whole rows, and the part-rows where a range cuts one in two).
void print_fsdp1_holdings(trace::Reader& fsdp1, int world_size);

// Per FSDP2 group and rank: the rows [first, end) of each parameter (torch.chunk on dim 0), as
// `dpscope stats` reads them from the trace (analysis::param_row_ranges).
void print_fsdp2_holdings(trace::Reader& fsdp2, int world_size);

// One line per parameter, one character per row (or per few rows of a tall parameter): the rank
// holding it under FSDP1 ('+' where two ranks share the row) and under FSDP2. The parameters and
// their units come from the FSDP1 run; FSDP2's rows follow from the shapes.
void draw_rows_side_by_side(trace::Reader& fsdp1, int world_size);

// The padding each strategy adds, in elements and where it lives: FSDP1's at the end of each
// flat parameter (kept in the last rank's shard, moved by every collective), FSDP2's per
// parameter (only in the collectives' padded chunks).
void print_padding(trace::Reader& fsdp1, int world_size);

}  // namespace dpscope::tutorials
