//! Drop day on real processes: the pre-queue and its draw, volume not
//! buying the drawn line, a line without a cap answered at the edge, and
//! idle passthrough while nobody waits.

mod beacon_draw;
mod fair_draw;
mod far_back;
mod passthrough;
mod pre_queue;
mod stock;
mod verified_draw;
