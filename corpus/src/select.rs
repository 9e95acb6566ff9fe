//! Deterministic sampling and de-duplication.

use std::collections::HashSet;

use crate::ProgramSource;

/// Up to `limit` items spread evenly over `items`, in their order: item `k * len / limit` for
/// `k` in `0..limit`. All of them when `limit >= len`.
pub fn spread<T: Clone>(items: &[T], limit: usize) -> Vec<T> {
    let len = items.len();
    if limit >= len {
        return items.to_vec();
    }
    (0..limit).map(|k| items[k * len / limit].clone()).collect()
}

/// Drops every program whose stage sources all equal an earlier program's (piglit has such twins
/// under different names); returns how many were dropped. Order is kept. Two programs that
/// differ only in a geometry or tessellation stage are both kept.
pub fn dedup_sources(programs: &mut Vec<ProgramSource>) -> usize {
    let before = programs.len();
    let mut seen = HashSet::new();
    programs.retain(|p| {
        seen.insert((
            p.vertex.clone(),
            p.fragment.clone(),
            p.geometry.clone(),
            p.tess_control.clone(),
            p.tess_evaluation.clone(),
        ))
    });
    before - programs.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_picks_evenly_and_in_order() {
        let items: Vec<u32> = (0..10).collect();
        assert_eq!(spread(&items, 5), [0, 2, 4, 6, 8]);
        assert_eq!(spread(&items, 3), [0, 3, 6]);
        assert_eq!(spread(&items, 1), [0]);
        assert_eq!(spread(&items, 0), Vec::<u32>::new());
        assert_eq!(spread(&items, 10), items);
        assert_eq!(spread(&items, 99), items);
        // Distinct picks whenever limit < len.
        let picks = spread(&items, 9);
        let unique: HashSet<_> = picks.iter().collect();
        assert_eq!(unique.len(), 9);
    }

    #[test]
    fn dedup_keeps_the_first_of_identical_programs() {
        let p = |name: &str, v: &str, f: &str| ProgramSource {
            name: name.into(),
            vertex: v.into(),
            fragment: f.into(),
            ..ProgramSource::default()
        };
        let mut programs = vec![
            p("a", "v1", "f1"),
            p("b", "v1", "f2"),
            p("c", "v1", "f1"),
            p("d", "v2", "f1"),
            p("e", "v1", "f2"),
        ];
        assert_eq!(dedup_sources(&mut programs), 2);
        let names: Vec<_> = programs.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "d"]);
    }
}
