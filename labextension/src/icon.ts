import { LabIcon } from '@jupyterlab/ui-components';

import iconSvg from '../style/icon.svg';

/** The dnnbench icon: a small layered network. */
export const dnnbenchIcon = new LabIcon({ name: 'dnnbench:icon', svgstr: iconSvg });
