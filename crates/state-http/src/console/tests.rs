use super::*;

/// The console's first view is these three files: their total is its transfer budget
/// (200 KB compressed at most; checked uncompressed here, which can only be larger).
#[test]
fn the_first_view_fits_its_budget() {
    let total: usize = ASSETS.iter().map(|(_, _, body)| body.len()).sum();
    assert!(total <= 200 * 1024, "the console is {total} bytes");
}

/// No script or style is inline (the policy would block it) and nothing comes from elsewhere.
#[test]
fn the_page_loads_only_its_own_files() {
    let page = std::str::from_utf8(ASSETS[0].2).unwrap();
    assert!(!page.contains("<script>") && !page.contains("style="), "inline script or style");
    let foreign: Vec<&str> = page.split(['"', '\'']).filter(|s| s.starts_with("http") || s.starts_with("//")).collect();
    assert!(foreign.is_empty(), "the page refers to other sites: {foreign:?}");
    assert!(page.contains(r#"src="/console/app.js""#) && page.contains(r#"href="/console/style.css""#));
    let script = std::str::from_utf8(ASSETS[1].2).unwrap();
    assert!(!script.contains("innerHTML") && !script.contains("eval(") && !script.contains("document.write"));
}
