/**
 * Spec files (`*.dnn.json`: a network, a cluster or a saved workbench state) open the workbench.
 *
 * The default widget factory for the file type shows a one-line placeholder, asks the server for the
 * workbench notebook that belongs to the file, opens it, and closes itself. "Open With > Editor"
 * still edits the JSON.
 */
import { ABCWidgetFactory, DocumentRegistry, DocumentWidget } from '@jupyterlab/docregistry';
import { Widget } from '@lumino/widgets';

import { dnnbenchIcon } from './icon';

/** The file type: multi-part extension, so plain `.json` files are untouched. */
export const SPEC_FILE_TYPE: Partial<DocumentRegistry.IFileType> = {
  name: 'dnnbench-spec',
  displayName: 'dnnbench spec',
  extensions: ['.dnn.json'],
  mimeTypes: ['application/json'],
  contentType: 'file',
  fileFormat: 'text',
  icon: dnnbenchIcon
};

export const SPEC_FACTORY = 'DNN Bench Workbench';

export class SpecOpenerFactory extends ABCWidgetFactory<DocumentWidget> {
  constructor(
    options: DocumentRegistry.IWidgetFactoryOptions<DocumentWidget>,
    private readonly _open: (path: string) => Promise<void>
  ) {
    super(options);
  }

  protected createNewWidget(context: DocumentRegistry.Context): DocumentWidget {
    const content = new Widget();
    content.addClass('dnnbench-spec-opener');
    content.node.textContent = `Opening the dnnbench workbench for ${context.path}…`;
    const widget = new DocumentWidget({ content, context });
    widget.title.icon = dnnbenchIcon;
    void context.ready
      .then(() => this._open(context.path))
      .then(
        () => widget.dispose(),
        (error: unknown) => {
          content.node.textContent = `Could not open the workbench for ${context.path}: ${String(error)}`;
        }
      );
    return widget;
  }
}
