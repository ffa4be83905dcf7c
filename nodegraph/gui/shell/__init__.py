"""The editor's shell: the entry point, the main window that joins the parts, its menus and
their edit actions, group tabs, panel edges, the start page and graph comparison."""
