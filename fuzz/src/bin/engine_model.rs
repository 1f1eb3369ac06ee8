#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Some(run) = state_fuzz::target("engine_model") {
        run(data);
    }
});
