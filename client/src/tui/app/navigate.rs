//! Moving through the rows and keeping the view, the cache and the open
//! delivery in step.

use super::{App, DetailState, Focus};
use crate::tui::detail::DetailDoc;
use crate::tui::view::layout;

impl App {
    pub(super) fn open_detail(&mut self, id: i64) {
        let loaded = self.source.get(id).and_then(|d| {
            let number = self.source.delivery_number(id)?;
            Ok((d, number, self.source.replay_runs(id)?))
        });
        match loaded {
            Ok((Some(delivery), number, runs)) => {
                let req = &delivery.request;
                let counted = req.replay_of.is_none() && !req.event_key.is_empty();
                let event = counted.then(|| (req.event_key.clone(), req.event_scope()));
                self.detail = Some(DetailState {
                    doc: DetailDoc::new(&delivery, number, &runs, self.reveal == Some(id)),
                    scroll: 0,
                    hscroll: 0,
                    event,
                });
                // The list shrinks beside the pane: the selected row must
                // stay on it, or another row would look selected.
                self.settle(self.selected);
            }
            Ok((None, ..)) => self.set_status(format!("delivery #{id} is no longer in the history"), true),
            Err(err) => self.set_status(format!("cannot read #{id}: {}", crate::error_line(&err)), true),
        }
    }

    /// Closes the open delivery; secrets shown in it are masked again.
    pub(super) fn close_detail(&mut self) {
        self.detail = None;
        self.reveal = None;
        self.focus = Focus::List;
    }

    /// Reads the open delivery again (its answer or a retry of its event
    /// came), keeping the place.
    pub(super) fn refresh_detail(&mut self, id: i64) {
        let place = self.detail.as_ref().map(|d| (d.scroll, d.hscroll));
        self.open_detail(id);
        if let (Some(detail), Some((scroll, hscroll))) = (&mut self.detail, place) {
            detail.scroll = scroll;
            detail.hscroll = hscroll;
        }
        self.clamp_detail_scroll();
    }

    /// A live row landed at `index`: follow the newest when at the top,
    /// otherwise keep the selected row (and the view) where they were.
    pub(super) fn row_inserted_at(&mut self, index: usize) {
        if self.follows_newest() {
            self.settle(0);
            return;
        }
        if index <= self.offset && !self.stays_at_top(1) {
            self.offset += 1;
        }
        let target = if index <= self.selected {
            self.selected + 1
        } else {
            self.selected
        };
        self.settle(target);
    }

    pub(super) fn rows_added_on_top(&mut self, added: usize) {
        if added == 0 {
            return;
        }
        if self.follows_newest() {
            self.settle(0);
        } else {
            if !self.stays_at_top(added) {
                self.offset += added;
            }
            self.settle(self.selected + added);
        }
    }

    /// Whether a view at the top of the list stays there as `added` rows
    /// come in above the selected one: while that row stays in sight, the
    /// new ones show, as they would on a list that still had room. Scrolled
    /// down, the rows in view stay put instead.
    fn stays_at_top(&self, added: usize) -> bool {
        self.offset == 0 && self.selected + added < self.list_rows()
    }

    /// Following the newest, the selection moved on with each row that
    /// came since the last frame: a key that moves it moves it from the row
    /// the screen showed selected, not from one the user never saw.
    pub(super) fn back_to_the_drawn_selection(&mut self) {
        let Some(drawn) = self.drawn_selection else { return };
        if !self.follows_newest() || self.selected_id() == Some(drawn) {
            return;
        }
        // Rows come a frame's worth at a time: the drawn row is near the top.
        let near = self.pager.len().min(self.list_rows().max(1) * 4);
        if let Some(index) = (0..near).find(|&i| self.pager.get(i).is_some_and(|row| row.id == drawn)) {
            self.settle(index);
        }
    }

    pub(super) fn follows_newest(&self) -> bool {
        self.selected == 0 && self.offset == 0 && self.detail.is_none()
    }

    /// Selects `target` (clamped), fetching the rows around it.
    pub(super) fn settle(&mut self, target: usize) {
        let rows = self.list_rows();
        // First the page holding the target (this finds where the history
        // ends), then the rows the view will show.
        self.fetch(target, target + 1);
        self.selected = target.min(self.pager.len().saturating_sub(1));
        if self.selected < self.offset {
            self.offset = self.selected;
        } else if self.selected >= self.offset + rows {
            self.offset = self.selected + 1 - rows;
        }
        if self.pager.end_reached() {
            self.offset = self.offset.min(self.pager.len().saturating_sub(rows));
        }
        self.fetch(self.offset, self.offset + rows);
    }

    pub(super) fn fetch(&mut self, start: usize, end: usize) {
        // A search's first page is on its way: reading it here would scan
        // on this thread, as the search does on its own.
        if self.waiting() == Some(super::Waiting::Rows) {
            return;
        }
        if let Err(err) = self.pager.ensure(start, end, self.source.as_ref()) {
            self.set_status(format!("cannot read the history: {}", crate::error_line(&err)), true);
        }
    }

    pub(super) fn list_rows(&self) -> usize {
        let areas = layout::areas(self.size, self.detail.is_some(), false, self.chrome(self.size.width));
        areas.list.map_or(1, layout::list_rows)
    }

    /// Where the detail pane is drawn, when the screen has room for it.
    fn detail_area(&self) -> Option<ratatui::layout::Rect> {
        layout::areas(self.size, true, true, self.chrome(self.size.width)).detail
    }

    pub(super) fn detail_rows(&self) -> usize {
        self.detail_area().map_or(1, layout::detail_rows)
    }

    /// Columns of text the detail pane shows, inside its border.
    pub(super) fn detail_columns(&self) -> usize {
        self.detail_area()
            .map_or(1, |area| usize::from(area.width.saturating_sub(2)).max(1))
    }

    /// Keeps the detail's scroll within its text both ways: sideways, no
    /// further than shows the end of its widest line.
    pub(super) fn clamp_detail_scroll(&mut self) {
        let rows = self.detail_rows();
        let columns = self.detail_columns();
        if let Some(detail) = &mut self.detail {
            detail.scroll = detail.scroll.min(detail.doc.last_scroll(rows, columns));
            if detail.hscroll > 0 {
                // Wrapped lines are never scrolled sideways.
                let cut = &detail.doc.lines[..detail.doc.wrap_from.min(detail.doc.lines.len())];
                let furthest = cut.iter().map(|l| end_in_view(l, columns)).max();
                detail.hscroll = detail.hscroll.min(furthest.unwrap_or(0));
            }
        }
    }
}

/// The fewest characters cut from the left of `line` that bring its end
/// into `columns` screen columns (sideways scrolling cuts whole characters
/// as they are seen, an emoji of several code points one; a wide one, as
/// in CJK text, takes two columns).
fn end_in_view(line: &ratatui::text::Line<'_>, columns: usize) -> usize {
    use unicode_segmentation::UnicodeSegmentation;
    let clusters: Vec<&str> = line
        .spans
        .iter()
        .flat_map(|span| span.content.graphemes(true))
        .collect();
    let mut width = 0;
    let kept = clusters
        .iter()
        .rev()
        .take_while(|cluster| {
            width += portpreview_shared::text::columns(cluster);
            width <= columns
        })
        .count();
    clusters.len() - kept
}
