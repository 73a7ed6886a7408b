"""The search strategy: history, set algebra, known papers, overlap, reports and exports."""
