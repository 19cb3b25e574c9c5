/**
 * dnnbench in JupyterLab (GitHub issue 9, docs/jupyterlab.md): a "DNN Bench" launcher tile and
 * palette commands that open a new workbench or a study notebook, and `*.dnn.json` spec files that
 * open the workbench on double-click. Notebooks are written by the server extension (dnnbench/face/labext.py)
 * from the templates in the Python package; this file only opens them.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, showErrorMessage } from '@jupyterlab/apputils';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { ILauncher } from '@jupyterlab/launcher';
import { NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { Widget } from '@lumino/widgets';

import * as api from './api';
import { dnnbenchIcon } from './icon';
import { SPEC_FACTORY, SPEC_FILE_TYPE, SpecOpenerFactory } from './specopener';

const CATEGORY = 'DNN Bench';

export namespace CommandIDs {
  export const newWorkbench = 'dnnbench:new-workbench';
  export const openNotebook = 'dnnbench:open-notebook';
  export const openEsgdStudy = 'dnnbench:open-esgd-study';
  export const openSpec = 'dnnbench:open-spec';
}

/** Study notebooks get launcher tiles; the list comes from the server (what the package ships). */
const ESGD_NOTEBOOK = 'esgd_study';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'dnnbench:plugin',
  description: 'Launcher tile, commands and spec-file opening for the dnnbench workbench.',
  autoStart: true,
  optional: [ILauncher, ICommandPalette, IDefaultFileBrowser],
  activate: (
    app: JupyterFrontEnd,
    launcher: ILauncher | null,
    palette: ICommandPalette | null,
    browser: IDefaultFileBrowser | null
  ): void => {
    const { commands, docRegistry } = app;
    const cwd = (): string => (browser ? browser.model.path : '');

    /** Open a notebook path; for a workbench, run all cells once the kernel is there. */
    const open = async (path: string, runAll: boolean): Promise<void> => {
      const widget = (await commands.execute('docmanager:open', { path, factory: 'Notebook' })) as Widget;
      if (runAll && widget instanceof NotebookPanel) {
        await widget.context.ready;
        await widget.sessionContext.ready;
        await NotebookActions.runAll(widget.content, widget.sessionContext);
      }
    };
    const report = (what: string) => (error: unknown) => {
      void showErrorMessage(`DNN Bench: ${what}`, String(error instanceof Error ? error.message : error));
    };
    const openSpec = async (path: string): Promise<void> => {
      const made = await api.specWorkbench(path);
      await open(made.path, true);
    };

    commands.addCommand(CommandIDs.newWorkbench, {
      label: args => (args['isLauncher'] ? 'DNN Bench' : 'New DNN Bench Workbench'),
      caption: 'A new dnnbench workbench notebook: network, cluster and configuration with live plots',
      icon: dnnbenchIcon,
      execute: async () => {
        try {
          const made = await api.newWorkbench(cwd());
          await open(made.path, true);
        } catch (error) {
          report('could not open a new workbench')(error);
        }
      }
    });

    const notebooks = new Map<string, string>(); // name -> title, filled from the server
    commands.addCommand(CommandIDs.openNotebook, {
      label: args => `Open ${notebooks.get(args['name'] as string) ?? (args['title'] as string) ?? args['name']}`,
      caption: 'Copy a dnnbench study notebook into the current folder (an existing copy is kept) and open it',
      icon: dnnbenchIcon,
      isEnabled: args => notebooks.has(args['name'] as string),
      execute: async args => {
        const name = args['name'] as string;
        try {
          const made = await api.copyNotebook(name, cwd());
          await open(made.path, false);
        } catch (error) {
          report(`could not open ${name}`)(error);
        }
      }
    });
    commands.addCommand(CommandIDs.openEsgdStudy, {
      label: 'Open the ESGD Study',
      caption: 'The ESGD edge-training study notebook',
      icon: dnnbenchIcon,
      isEnabled: () => notebooks.has(ESGD_NOTEBOOK),
      execute: () => commands.execute(CommandIDs.openNotebook, { name: ESGD_NOTEBOOK })
    });
    commands.addCommand(CommandIDs.openSpec, {
      label: 'Open in DNN Bench Workbench',
      caption: 'Open the workbench on a dnnbench spec file (network, cluster or saved workbench)',
      icon: dnnbenchIcon,
      execute: async args => {
        let path = args['path'] as string | undefined;
        if (!path && browser) {
          const item = browser.selectedItems().next();
          path = item && !item.done ? item.value.path : undefined;
        }
        if (!path) {
          return;
        }
        try {
          await openSpec(path);
        } catch (error) {
          report(`could not open the workbench for ${path}`)(error);
        }
      }
    });

    docRegistry.addFileType(SPEC_FILE_TYPE);
    docRegistry.addWidgetFactory(
      new SpecOpenerFactory(
        {
          name: SPEC_FACTORY,
          label: 'DNN Bench Workbench',
          fileTypes: ['dnnbench-spec'],
          defaultFor: ['dnnbench-spec'],
          readOnly: true
        },
        openSpec
      )
    );
    app.contextMenu.addItem({
      command: CommandIDs.openSpec,
      selector: '.jp-DirListing-item[data-file-type="dnnbench-spec"]',
      rank: 1
    });

    if (launcher) {
      launcher.add({ command: CommandIDs.newWorkbench, category: 'Notebook', rank: 10, args: { isLauncher: true } });
    }
    if (palette) {
      palette.addItem({ command: CommandIDs.newWorkbench, category: CATEGORY });
      palette.addItem({ command: CommandIDs.openEsgdStudy, category: CATEGORY });
    }

    // `dnnbench lab` lands on the running workbench: the notebook it opened is run once, as the
    // launcher tile runs a new one (the server names it once per start: dnnbench/face/labext.py).
    void app.restored
      .then(() => api.startup())
      .then(path => (path ? open(path, true) : undefined))
      .catch(error => console.warn('dnnbench: could not run the workbench notebook', error));

    api
      .listNotebooks()
      .then(list => {
        for (const nb of list) {
          notebooks.set(nb.name, nb.title);
          palette?.addItem({ command: CommandIDs.openNotebook, category: CATEGORY, args: { name: nb.name } });
          launcher?.add({ command: CommandIDs.openNotebook, category: CATEGORY, args: { name: nb.name } });
        }
        commands.notifyCommandChanged(CommandIDs.openEsgdStudy);
      })
      .catch(error => {
        // Not a dialog at every start: the launcher tile and spec files still say what is wrong when used.
        console.warn('dnnbench: the server extension did not answer (is it enabled? docs/jupyterlab.md)', error);
      });
  }
};

export default plugin;
